package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Every examples/rank_*.lua runs to completion (they check themselves) on
// the memory backend and on Redis.
func TestRankExamplesRun(t *testing.T) {
	examples, err := filepath.Glob("../../examples/rank_*.lua")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no rank examples: %v", err)
	}
	cfg, _ := redisConfigFile(t)
	for _, ex := range examples {
		for backend, args := range map[string][]string{"memory": {"run", ex}, "redis": {"run", "--config", cfg, ex}} {
			t.Run(filepath.Base(ex)+"/"+backend, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				r := runShield(t, ctx, args...)
				if r.code != 0 {
					t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
				}
			})
		}
	}
}

func TestRankCapabilitySwitchedOff(t *testing.T) {
	cfg := writeFile(t, "norank.yaml", "rank:\n  enabled: false\n")
	script := writeFile(t, "t.lua", `assert(shield.rank == nil, "shield.rank registered"); assert(shield.global ~= nil); print("ok")`)
	r := runShield(t, context.Background(), "run", "--config", cfg, script)
	if r.code != 0 || !strings.Contains(r.stdout, "ok") {
		t.Fatalf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// rankRaceScript is one process of TestRankSwapsAndMaxUpdatesAcrossProcesses.
// Every change it makes is logged with the version it got, which orders all
// changes of all processes totally; snapshots are logged with theirs.
const rankRaceScript = `
local role, board, ms, seed = arg[1], arg[2], tonumber(arg[3]), tonumber(arg[4])
local r = shield.rank(board)
local N = 40
local function uid(i) return string.format("p%02d", i) end
local function snapline(s)
	local out = { "snap " .. s.version .. " " .. s.count }
	for _, e in ipairs(s.entries) do out[#out + 1] = string.format("%s:%.17g", e.uid, e.score) end
	return table.concat(out, " ")
end

if role == "setup" then
	local t = {}
	for i = 1, N do t[uid(i)] = i * 100 end
	local _, v = r:mupdate(t)
	print("setup " .. v)
	return
elseif role == "final" then
	print(snapline(r:snapshot(1, 1000)))
	return
end

math.randomseed(seed)
local start = shield.now_ms()
local deadline = start + ms
if role == "reader" then
	local last, snaps, reads = -1, 0, 0
	while shield.now_ms() < deadline do
		local s = r:snapshot(1, 1000)
		reads = reads + 1
		assert(s.count == N and #s.entries == N, "count " .. s.count)
		local seen = {}
		for i, e in ipairs(s.entries) do
			assert(e.rank == i, "rank " .. e.rank .. " at " .. i)
			assert(not seen[e.uid], e.uid .. " on two positions")
			seen[e.uid] = true
		end
		if s.version ~= last then
			print(snapline(s))
			last, snaps = s.version, snaps + 1
		end
		if reads % 4 == 0 then shield.sleep(0) end
	end
	print("reader reads=" .. reads .. " snaps=" .. snaps)
	return
end

-- writer: tasks that swap random pairs (plain and versioned) and raise
-- random scores with mode = "max"
local log, running = {}, 0
local plain, applied, conflicts, raised = 0, 0, 0, 0
local function pair()
	local a = math.random(N)
	local b = math.random(N - 1)
	if b >= a then b = b + 1 end
	return uid(a), uid(b)
end
for _ = 1, 4 do
	running = running + 1
	shield.spawn(function()
		while shield.now_ms() < deadline do
			local k = math.random(3)
			if k == 1 then
				local a, b = pair()
				local sa, sb, v = r:swap(a, b)
				assert(sa, tostring(sb))
				log[#log + 1] = string.format("swap %d %s %s %.17g %.17g", v, a, b, sa, sb)
				plain = plain + 1
			elseif k == 2 then
				local a, b = pair()
				local ea, eb = r:score(a), r:score(b)
				if math.random(2) == 1 then shield.sleep(0) end
				local sa, why, v = r:swap(a, b, { expect = { [a] = ea, [b] = eb } })
				if sa then
					log[#log + 1] = string.format("vswap %d %s %s %.17g %.17g", v, a, b, ea, eb)
					applied = applied + 1
				else
					assert(why == "version_conflict", tostring(why))
					conflicts = conflicts + 1
				end
			else
				local u = uid(math.random(N))
				local score = math.random(0, 40) * 100 + math.floor((shield.now_ms() - start) / 2)
				local s, changed, v = r:update(u, score, { mode = "max" })
				assert(s >= score)
				if changed then
					log[#log + 1] = string.format("max %d %s %.17g", v, u, score)
					raised = raised + 1
				end
			end
		end
		running = running - 1
	end)
end
while running > 0 do shield.sleep(10) end
io.write(table.concat(log, "\n"), "\n")
print(string.format("writer plain=%d applied=%d conflicts=%d raised=%d", plain, applied, conflicts, raised))
`

// member is one player in the replay: its score and its reach number
// (equal scores rank by reach, earliest first).
type member struct {
	score float64
	reach int
}

type boardState map[string]*member

// order lists the uids best first, as the board must rank them.
func (s boardState) order() []string {
	uids := make([]string, 0, len(s))
	for u := range s {
		uids = append(uids, u)
	}
	sort.Slice(uids, func(i, j int) bool {
		a, b := s[uids[i]], s[uids[j]]
		if a.score != b.score {
			return a.score > b.score
		}
		return a.reach < b.reach
	})
	return uids
}

func (s boardState) line(version int64) string {
	out := []string{fmt.Sprintf("snap %d %d", version, len(s))}
	for _, u := range s.order() {
		out = append(out, fmt.Sprintf("%s:%s", u, strconv.FormatFloat(s[u].score, 'g', 17, 64)))
	}
	return strings.Join(out, " ")
}

// 4 processes swap random pairs (plain and versioned) and raise scores with
// mode = "max" for 10 s while a fifth reads snapshots. Every change carries
// the board version it produced, so the test replays all of them in version
// order from the initial board and checks: the versions are exactly the
// consecutive numbers after the setup's (no change unaccounted for); each
// plain swap exchanged the two scores the replay holds; each applied
// versioned swap found exactly the scores it expected (it never applied
// over a concurrent change); each max update raised the score; every
// snapshot the reader saw — and the final board — is exactly the replayed
// board at its version, in the tie order (so the multiset of scores changed
// only by the updates, and no two players ever shared a position).
func TestRankSwapsAndMaxUpdatesAcrossProcesses(t *testing.T) {
	cfg, _ := redisConfigFile(t)
	script := writeFile(t, "race.lua", rankRaceScript)
	board := "race"
	setup := runShield(t, context.Background(), "run", "--config", cfg, script, "setup", board)
	if setup.code != 0 {
		t.Fatalf("setup: %s", setup.stderr)
	}
	v0, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(setup.stdout, "setup ")), 10, 64)
	if err != nil {
		t.Fatalf("setup printed %q", setup.stdout)
	}
	const writers, ms = 4, 10000
	res := runMany(t, writers+1, cfg, script, func(i int) []string {
		if i == writers {
			return []string{"reader", board, strconv.Itoa(ms + 1500), "99"}
		}
		return []string{"writer", board, strconv.Itoa(ms), strconv.Itoa(i + 1)}
	})
	final := runShield(t, context.Background(), "run", "--config", cfg, script, "final", board)
	if final.code != 0 {
		t.Fatalf("final: %s", final.stderr)
	}

	type event struct {
		kind   string
		a, b   string
		x, y   float64
		source string
	}
	events := map[int64]event{}
	snaps := map[int64]string{}
	var applied, conflicts, plain, raised int
	for i, r := range res {
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			switch f[0] {
			case "swap", "vswap", "max":
				v, _ := strconv.ParseInt(f[1], 10, 64)
				e := event{kind: f[0], a: f[2], source: line}
				if f[0] == "max" {
					e.x, _ = strconv.ParseFloat(f[3], 64)
				} else {
					e.b = f[3]
					e.x, _ = strconv.ParseFloat(f[4], 64)
					e.y, _ = strconv.ParseFloat(f[5], 64)
				}
				if prev, dup := events[v]; dup {
					t.Fatalf("version %d returned twice: %q and %q", v, prev.source, line)
				}
				events[v] = e
			case "snap":
				v, _ := strconv.ParseInt(f[1], 10, 64)
				snaps[v] = line
			case "writer":
				m := fields(t, line)
				plain += atoi(t, m["plain"])
				applied += atoi(t, m["applied"])
				conflicts += atoi(t, m["conflicts"])
				raised += atoi(t, m["raised"])
			case "reader":
			default:
				t.Fatalf("process %d printed %q", i, line)
			}
		}
	}
	t.Logf("%d changes (%d plain swaps, %d versioned swaps applied, %d refused, %d max raises), %d snapshots",
		len(events), plain, applied, conflicts, raised, len(snaps))
	if plain == 0 || applied == 0 || conflicts == 0 || raised == 0 || len(snaps) < 10 {
		t.Fatalf("the run did not exercise every case")
	}

	state := boardState{}
	for i := 1; i <= 40; i++ {
		state[fmt.Sprintf("p%02d", i)] = &member{score: float64(i * 100), reach: i}
	}
	reach := 40
	checkSnap := func(v int64) {
		if got, ok := snaps[v]; ok {
			if want := state.line(v); got != want {
				t.Fatalf("snapshot at version %d differs from the replay:\n got %s\nwant %s", v, got, want)
			}
			delete(snaps, v)
		}
	}
	checkSnap(v0)
	last := v0 + int64(len(events))
	for v := v0 + 1; v <= last; v++ {
		e, ok := events[v]
		if !ok {
			t.Fatalf("no change logged for version %d (of %d..%d)", v, v0+1, last)
		}
		switch e.kind {
		case "swap": // new scores: a got x, b got y
			a, b := state[e.a], state[e.b]
			if a.score != e.y || b.score != e.x {
				t.Fatalf("version %d: %s, but the replay had %s=%v %s=%v", v, e.source, e.a, a.score, e.b, b.score)
			}
			*a, *b = *b, *a
		case "vswap": // expected scores: a had x, b had y
			a, b := state[e.a], state[e.b]
			if a.score != e.x || b.score != e.y {
				t.Fatalf("version %d: versioned swap %s applied over a change: the replay had %s=%v %s=%v", v, e.source, e.a, a.score, e.b, b.score)
			}
			*a, *b = *b, *a
		case "max":
			m := state[e.a]
			if e.x <= m.score {
				t.Fatalf("version %d: %s did not raise %v", v, e.source, m.score)
			}
			reach++
			m.score, m.reach = e.x, reach
		}
		checkSnap(v)
	}
	if len(snaps) > 0 {
		for v, s := range snaps {
			t.Fatalf("snapshot at version %d is outside the logged changes (%d..%d): %s", v, v0, last, s)
		}
	}
	if got, want := strings.TrimSpace(final.stdout), state.line(last); got != want {
		t.Fatalf("final board differs from the replay:\n got %s\nwant %s", got, want)
	}
}
