package bindings

import (
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/shieldrt/shieldglobal/core/rank"
	"github.com/shieldrt/shieldglobal/internal/runtime"
)

func memoryRanks() *runtime.Services {
	return &runtime.Services{Capabilities: []runtime.Capability{testRanks(rank.NewMemory(nil), nil)}}
}

// Every call returns exactly the documented values: counted with select("#").
func TestRankReturnShapes(t *testing.T) {
	rt := newTestRuntime(t, memoryRanks())
	mustRun(t, rt, `
		local r = shield.rank("shapes")
		local function shape(...) -- "n: type type ..."
			local out = { tostring(select("#", ...)) .. ":" }
			for i = 1, select("#", ...) do out[#out + 1] = type((select(i, ...))) end
			return table.concat(out, " ")
		end
		local got = {
			update = shape(r:update("a", 10)),
			update_max = shape(r:update("a", 5, { mode = "max" })),
			mupdate = shape(r:mupdate({ b = 20, c = 30 })),
			incr = shape(r:incr("a", 1)),
			swap = shape(r:swap("a", "b")),
			swap_missing = shape(r:swap("a", "zz")),
			swap_conflict = shape(r:swap("a", "b", { expect = { a = 0, b = 0 } })),
			position = shape(r:position("a")),
			position_missing = shape(r:position("zz")),
			score = shape(r:score("a")),
			score_missing = shape(r:score("zz")),
			top = shape(r:top(2)),
			range = shape(r:range(1, 2)),
			range_by_score = shape(r:range_by_score(0, 100)),
			around = shape(r:around("a", 1)),
			around_missing = shape(r:around("zz", 1)),
			count = shape(r:count()),
			version = shape(r:version()),
			snapshot = shape(r:snapshot(1, 2)),
			archive_missing = shape(r:archive("20240101")),
			remove = shape(r:remove("c")),
			clear = shape(r:clear()),
		}
		result = got`)
	want := map[string]string{
		"update": "3: number boolean number", "update_max": "3: number boolean number",
		"mupdate": "2: number number", "incr": "2: number number",
		"swap": "3: number number number", "swap_missing": "2: nil string", "swap_conflict": "2: nil string",
		"position": "1: number", "position_missing": "1: nil", "score": "1: number", "score_missing": "1: nil",
		"top": "1: table", "range": "1: table", "range_by_score": "1: table",
		"around": "1: table", "around_missing": "2: nil string",
		"count": "1: number", "version": "1: number", "snapshot": "1: table", "archive_missing": "2: nil string",
		"remove": "2: boolean number", "clear": "2: number number",
	}
	got := global(t, rt, "result").(*lua.LTable)
	for k, w := range want {
		if g := got.RawGetString(k).String(); g != w {
			t.Errorf("%s returns %q, want %q", k, g, w)
		}
	}

	// Entries have exactly uid, score and rank; around and snapshot exactly
	// their three fields.
	mustRun(t, rt, `
		local r = shield.rank("fields")
		r:mupdate({ a = 1, b = 2, c = 3 })
		local function keys(t)
			local ks = {}
			for k in pairs(t) do ks[#ks + 1] = k end
			table.sort(ks)
			return table.concat(ks, ",")
		end
		local a = r:around("b", 1)
		local s = r:snapshot(1, 3)
		fields = table.concat({ keys(r:top(1)[1]), keys(a), keys(a.target), keys(s), keys(s.entries[3]) }, " ")`)
	if g, w := global(t, rt, "fields").String(), "rank,score,uid above,below,target rank,score,uid count,entries,version rank,score,uid"; g != w {
		t.Errorf("fields %q, want %q", g, w)
	}
}

func TestRankArgumentErrors(t *testing.T) {
	rt := newTestRuntime(t, memoryRanks())
	mustRun(t, rt, `r = shield.rank("args"); r:mupdate({ a = 1, b = 2 })`)
	cases := map[string]string{
		`r:update("a", "x")`:               `test.lua:1: shield.rank: bad argument #3 to 'update' (number expected, got string)`,
		`r:update("a", 0/0)`:               `test.lua:1: shield.rank: bad argument #3 to 'update' (score must be a finite number, got NaN)`,
		`r:update("a", 1/0)`:               `(score must be a finite number, got +Inf)`,
		`r:incr("a", -1/0)`:                `bad argument #3 to 'incr' (delta must be a finite number, got -Inf)`,
		`r:update(1, 2)`:                   `bad argument #2 to 'update' (string expected, got number)`,
		`r:update("a", 1, { mode = 3 })`:   `bad argument #4 to 'update' (option mode: string expected, got number)`,
		`r:update("a", 1, "max")`:          `bad argument #4 to 'update' (table expected, got string)`,
		`r:top(0)`:                         `bad argument #2 to 'top' (n must be an integer >= 1, got 0)`,
		`r:around("a", -1)`:                `bad argument #3 to 'around' (n must be an integer >= 1, got -1)`,
		`r:range(3, 2)`:                    `bad argument #3 to 'range' (stop 2 is before start 3)`,
		`r:range_by_score(2, 1)`:           `bad argument #3 to 'range_by_score' (max 1 is below min 2)`,
		`r:swap("a", "b", { expect = 5 })`: `option expect: table expected, got number`,
		`r:swap("a", "b", { expect = { a = 1, b = "2" } })`: `expect: score of "b" must be a finite number, got "2"`,
		`r:archive(-1)`:                             `date must be "YYYYMMDD" or Unix milliseconds from 0 to 253402300799999, got -1`,
		`r:archive(20240230)`:                       `bad argument #2 to 'archive' (date 20240230 is a number from 19700101 to 99991231 but not a calendar date YYYYMMDD)`,
		`r:archive(20240101.5)`:                     `(date 20240101.5 is a number from 19700101 to 99991231 but not a calendar date YYYYMMDD)`,
		`r:mupdate({ [true] = 1 })`:                 `keys must be non-empty uid strings, got boolean`,
		`r.count()`:                                 `bad argument #1 to 'count' (shield.rank expected, got no value (call it with ':'))`,
		`r.top(shield.global, 1)`:                   `bad argument #1 to 'top' (shield.rank expected, got nil`,
		`shield.rank("x", { ties = 1 })`:            `shield: bad argument #2 to 'rank' (option ties: string expected, got number)`,
		`shield.rank("x", { max_members = 1.5 })`:   `option max_members must be a whole number from 1 to 2147483647, got 1.5`,
		`shield.rank("x", { [1] = "daily" })`:       `bad argument #2 to 'rank' (option keys must be strings, got number 1)`,
		`shield.rank("x", { distributed = false })`: `option distributed needs the reset option`,
		`shield.rank("x", "daily")`:                 `bad argument #2 to 'rank' (table expected, got string)`,
	}
	for src, want := range cases {
		err := run(t, rt, src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %q", src, err, want)
		}
	}
	// A board name's tie policy is the core's contract: a write through a
	// handle with the other policy is refused, naming the call.
	err := run(t, rt, `shield.rank("args", { ties = "uid" }):update("c", 1)`)
	if err == nil || !strings.Contains(err.Error(), `test.lua:1: shield.rank:update: rank: update "args"`) {
		t.Errorf("mixed ties: %v", err)
	}
}
