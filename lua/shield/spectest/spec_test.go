// Package spectest tests lua/shield/spec.lua (require("shield.spec")), the
// busted/luassert-compatible spec runner, on a bare gopher-lua state.
package spectest

import (
	"fmt"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"

	shieldlua "github.com/shieldrt/shieldglobal/lua/shield"
)

// yieldSafePcall mirrors what the host prelude does: the protected function
// runs in a child coroutine and every yield from inside is passed up to our
// own resumer, with the results handed back down.
const yieldSafePcall = `
local co_create, co_resume, co_yield = coroutine.create, coroutine.resume, coroutine.yield
local select = select
local DONE = {}
-- not a tail call: f may be a Go function, and a Go function tail-called at the
-- outermost level of a coroutine ends it in gopher-lua v1.1.2
local function call(f, ...)
	return DONE, f(...)
end
local function settle(co, ok, ...)
	if not ok then
		return false, ...
	end
	if (...) == DONE then
		return true, select(2, ...)
	end
	return settle(co, co_resume(co, co_yield(...)))
end
function pcall(f, ...)
	local co = co_create(call)
	return settle(co, co_resume(co, f, ...))
end
`

// specFile is the chunk name spec sources are loaded under.
const specFile = "spec_file.lua"

type harness struct {
	t      *testing.T
	L      *lua.LState
	lines  []string // everything written by the last run
	blocks int      // calls of block()
	wakes  []string // values block() was resumed with
}

type options struct {
	pcallBeforeLoad bool // install the yield-safe pcall before loading spec.lua
	pcallAfterLoad  bool // ... or after it (both mirror possible host orders)
}

func newHarness(t *testing.T, opt options) *harness {
	t.Helper()
	src := shieldlua.Spec
	L := lua.NewState()
	t.Cleanup(L.Close)
	h := &harness{t: t, L: L}

	if opt.pcallBeforeLoad {
		h.exec(yieldSafePcall, "pcall.lua")
	}
	fn, err := L.Load(strings.NewReader(string(src)), "<shield>/spec.lua")
	if err != nil {
		t.Fatalf("load spec.lua: %v", err)
	}
	preload := L.GetField(L.GetField(L.Get(lua.EnvironIndex), "package"), "preload").(*lua.LTable)
	preload.RawSetString("shield.spec", fn)

	L.SetGlobal("__write", L.NewFunction(func(L *lua.LState) int {
		h.lines = append(h.lines, L.CheckString(1))
		return 0
	}))
	// block() suspends the runner coroutine until the harness resumes it,
	// like a blocking host call; it returns what it was resumed with.
	L.SetGlobal("block", L.NewFunction(func(L *lua.LState) int {
		h.blocks++
		return L.Yield(lua.LString("blocked"))
	}))
	h.exec(`spec = require("shield.spec"); spec.install(_G)`, "install.lua")
	if opt.pcallAfterLoad {
		h.exec(yieldSafePcall, "pcall.lua")
	}
	return h
}

// exec runs src on the main state (not in a coroutine).
func (h *harness) exec(src, name string) {
	h.t.Helper()
	fn, err := h.L.Load(strings.NewReader(src), name)
	if err != nil {
		h.t.Fatalf("load %s: %v", name, err)
	}
	h.L.Push(fn)
	if err := h.L.PCall(0, lua.MultRet, nil); err != nil {
		h.t.Fatalf("run %s: %v", name, err)
	}
	h.L.SetTop(0)
}

// load runs a spec file: describe/it calls only register tests.
func (h *harness) load(src string) {
	h.t.Helper()
	h.exec(src, specFile)
}

// eval returns the value of a Lua expression as a string.
func (h *harness) eval(expr string) string {
	h.t.Helper()
	if err := h.L.DoString("return " + expr); err != nil {
		h.t.Fatalf("eval %s: %v", expr, err)
	}
	v := h.L.Get(-1)
	h.L.SetTop(0)
	return v.String()
}

// run runs spec.run(__write) inside a coroutine, resuming it from Go every
// time a test body blocks, and returns its results.
func (h *harness) run() (passed, failed, skipped int) {
	h.t.Helper()
	h.lines = nil
	co, cancel := h.L.NewThread()
	if cancel != nil {
		defer cancel()
	}
	fn, err := h.L.Load(strings.NewReader(
		"local p, f, s, e = spec.run(__write)\nreturn p, f + e, s"), "runner.lua")
	if err != nil {
		h.t.Fatal(err)
	}
	st, err, vals := h.L.Resume(co, fn)
	for i := 0; st == lua.ResumeYield; i++ {
		if i > 1000 {
			h.t.Fatal("runner never finished")
		}
		if len(vals) != 1 || vals[0].String() != "blocked" {
			h.t.Fatalf("runner yielded %v, want the value block() yielded", vals)
		}
		wake := fmt.Sprintf("wake-%d", h.blocks)
		h.wakes = append(h.wakes, wake)
		st, err, vals = h.L.Resume(co, fn, lua.LString(wake))
	}
	if err != nil {
		h.t.Fatalf("runner failed: %v\noutput so far:\n%s", err, strings.Join(h.lines, "\n"))
	}
	if len(vals) != 3 {
		h.t.Fatalf("spec.run returned %v, want 3 numbers", vals)
	}
	num := func(v lua.LValue) int {
		n, ok := v.(lua.LNumber)
		if !ok {
			h.t.Fatalf("spec.run returned %v (%s), want a number", v, v.Type())
		}
		return int(n)
	}
	return num(vals[0]), num(vals[1]), num(vals[2])
}

func (h *harness) output() string { return strings.Join(h.lines, "\n") }

func (h *harness) wantLines(want ...string) {
	h.t.Helper()
	if got := h.output(); got != strings.Join(want, "\n") {
		h.t.Errorf("output:\n%s\n\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

func (h *harness) wantCounts(p, f, s, wp, wf, ws int) {
	h.t.Helper()
	if p != wp || f != wf || s != ws {
		h.t.Errorf("counts = %d passed, %d failed, %d skipped; want %d, %d, %d\noutput:\n%s",
			p, f, s, wp, wf, ws, h.output())
	}
}

func TestSummaryAndOutputFormat(t *testing.T) {
	h := newHarness(t, options{pcallAfterLoad: true})
	h.load(`
it("top level", function() end)
describe("outer", function()
	it("passes", function() assert.are.equal(1, 1) end)
	describe("inner", function()
		it("leaf", function() end)
		pending("later")
	end)
	it("fails", function()
		assert.are.equal(1, 2)
	end)
	it("no body yet")
end)
`)
	p, f, s := h.run()
	h.wantCounts(p, f, s, 3, 1, 2)
	h.wantLines(
		"ok - top level",
		"ok - outer passes",
		"ok - outer inner leaf",
		"PENDING - outer inner later",
		"FAIL - outer fails",
		// the position is the line of the failing assertion in the spec file
		"    spec_file.lua:10: expected: 1, got: 2",
		"PENDING - outer no body yet",
		"3 passed, 1 failed, 2 skipped",
	)

	// no pending tests: no ", N skipped" suffix
	h.load(`describe("d", function()
		it("a", function() end)
		it("b", function() error("boom", 0) end)
	end)`)
	p, f, s = h.run()
	h.wantCounts(p, f, s, 1, 1, 0)
	// error() is an error, not a failed assertion (busted's distinction)
	h.wantLines("ok - d a", "ERROR - d b", "    boom", "1 passed, 0 failed, 1 error")
}

func TestNothingRunsAtLoadTime(t *testing.T) {
	h := newHarness(t, options{pcallAfterLoad: true})
	h.load(`
ran = {}
setup(function() ran[#ran + 1] = "setup" end)
describe("d", function()
	before_each(function() ran[#ran + 1] = "before_each" end)
	it("t", function() ran[#ran + 1] = "t" end)
end)`)
	if got := h.eval("#ran"); got != "0" {
		t.Fatalf("%s functions ran while loading", got)
	}
	p, f, s := h.run()
	h.wantCounts(p, f, s, 1, 0, 0)
	if got := h.eval("table.concat(ran, ',')"); got != "setup,before_each,t" {
		t.Errorf("ran = %s", got)
	}
}

func TestHookOrder(t *testing.T) {
	h := newHarness(t, options{pcallAfterLoad: true})
	h.load(`
log = {}
local function rec(s) return function() log[#log + 1] = s end end
setup(rec("root.setup"))
teardown(rec("root.teardown"))
before_each(rec("root.be"))
after_each(rec("root.ae"))
describe("A", function()
	setup(rec("A.setup"))
	teardown(rec("A.teardown"))
	before_each(rec("A.be1"))
	before_each(rec("A.be2"))
	after_each(rec("A.ae1"))
	after_each(rec("A.ae2"))
	it("t1", rec("A.t1"))
	describe("B", function()
		setup(rec("B.setup"))
		teardown(rec("B.teardown"))
		before_each(rec("B.be"))
		after_each(rec("B.ae"))
		it("t2", rec("B.t2"))
	end)
	it("t3", rec("A.t3"))
	describe("only pending", function()
		setup(rec("P.setup"))
		teardown(rec("P.teardown"))
		pending("p")
	end)
end)
it("t4", rec("t4"))
`)
	p, f, s := h.run()
	h.wantCounts(p, f, s, 4, 0, 1)
	want := []string{
		"root.setup",
		"A.setup",
		"root.be", "A.be1", "A.be2", "A.t1", "A.ae1", "A.ae2", "root.ae",
		"B.setup",
		"root.be", "A.be1", "A.be2", "B.be", "B.t2", "B.ae", "A.ae1", "A.ae2", "root.ae",
		"B.teardown",
		"root.be", "A.be1", "A.be2", "A.t3", "A.ae1", "A.ae2", "root.ae",
		// a block without runnable tests gets no setup/teardown
		"A.teardown",
		"root.be", "t4", "root.ae",
		"root.teardown",
	}
	if got := h.eval("table.concat(log, ' ')"); got != strings.Join(want, " ") {
		t.Errorf("hook order:\n got: %s\nwant: %s", got, strings.Join(want, " "))
	}
	h.wantLines(
		"ok - A t1",
		"ok - A B t2",
		"ok - A t3",
		"PENDING - A only pending p",
		"ok - t4",
		"4 passed, 0 failed, 1 skipped",
	)
}

func TestHookFailures(t *testing.T) {
	h := newHarness(t, options{pcallAfterLoad: true})
	h.load(`
log = {}
describe("be", function()
	before_each(function() error("be boom", 0) end)
	after_each(function() log[#log + 1] = "be.ae" end)
	it("t", function() log[#log + 1] = "be.t" end)
end)
describe("ae", function()
	after_each(function() error("ae boom", 0) end)
	it("passing body", function() end)
	it("failing body", function() error("body boom", 0) end)
end)
describe("su", function()
	setup(function() error("setup boom", 0) end)
	teardown(function() log[#log + 1] = "su.teardown" end)
	before_each(function() log[#log + 1] = "su.be" end)
	it("t1", function() log[#log + 1] = "su.t1" end)
	describe("nested", function()
		setup(function() log[#log + 1] = "nested.setup" end)
		it("t2", function() log[#log + 1] = "su.t2" end)
	end)
	pending("p")
end)
describe("td", function()
	teardown(function() error("teardown boom", 0) end)
	it("t", function() end)
end)
`)
	p, f, s := h.run()
	h.wantCounts(p, f, s, 1, 6, 1)
	h.wantLines(
		"ERROR - be t",
		"    before_each: be boom",
		"ERROR - ae passing body",
		"    after_each: ae boom",
		"ERROR - ae failing body",
		"    body boom",
		"    after_each: ae boom",
		"ERROR - su t1",
		"    setup: setup boom",
		"ERROR - su nested t2",
		"    setup: setup boom",
		"PENDING - su p",
		"ok - td t",
		"ERROR - td (teardown)",
		"    teardown: teardown boom",
		"1 passed, 0 failed, 6 errors, 1 skipped",
	)
	// after_each still ran after the failed before_each (the body did not);
	// nothing of the failed-setup block ran but its teardown
	if got := h.eval("table.concat(log, ' ')"); got != "be.ae su.teardown" {
		t.Errorf("log = %q", got)
	}
}

func TestDescribeErrorAndMisuse(t *testing.T) {
	h := newHarness(t, options{pcallAfterLoad: true})
	h.load(`
describe("broken", function()
	it("registered before the error", function() end)
	error("oops", 0)
end)
describe("misuse", function()
	it("nested it", function() it("x", function() end) end)
	it("nested describe", function() describe("x", function() end) end)
end)
`)
	p, f, s := h.run()
	h.wantCounts(p, f, s, 1, 3, 0)
	out := h.output()
	for _, want := range []string{
		"ok - broken registered before the error\nERROR - broken\n    describe: oops\n",
		"ERROR - misuse nested it\n    spec_file.lua:7: it() cannot be called while a test is running\n",
		"ERROR - misuse nested describe\n    spec_file.lua:8: describe() cannot be called while a test is running\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPendingInsideTest(t *testing.T) {
	h := newHarness(t, options{pcallAfterLoad: true})
	h.load(`
describe("d", function()
	it("skips itself", function()
		pending("not ready")
		error("not reached")
	end)
end)`)
	p, f, s := h.run()
	h.wantCounts(p, f, s, 0, 0, 1)
	h.wantLines("PENDING - d skips itself", "    not ready", "0 passed, 0 failed, 1 skipped")
}

func TestErrorWithTraceback(t *testing.T) {
	h := newHarness(t, options{pcallAfterLoad: true})
	h.load(`
it("t", function()
	error({ message = "boom\nsecond line", traceback = "stack traceback:\n\tx.lua:1: in main chunk" })
end)
it("plain table", function() error({ code = 7, why = "x" }) end)
`)
	p, f, s := h.run()
	h.wantCounts(p, f, s, 0, 2, 0)
	// the position missing from the message comes from the traceback
	h.wantLines(
		"ERROR - t",
		"    x.lua:1: boom",
		"    second line",
		"    stack traceback:",
		"    \tx.lua:1: in main chunk",
		"ERROR - plain table",
		`    {code = 7, why = "x"}`,
		"0 passed, 0 failed, 2 errors",
	)
}

func TestRegistryResetsBetweenRuns(t *testing.T) {
	h := newHarness(t, options{pcallAfterLoad: true})
	h.load(`describe("file1", function() it("a", function() end) it("b", function() end) end)`)
	p, f, s := h.run()
	h.wantCounts(p, f, s, 2, 0, 0)

	p, f, s = h.run()
	h.wantCounts(p, f, s, 0, 0, 0)
	h.wantLines("0 passed, 0 failed")

	h.load(`before_each(function() count = (count or 0) + 1 end)
		describe("file2", function() it("c", function() end) end)`)
	p, f, s = h.run()
	h.wantCounts(p, f, s, 1, 0, 0)
	h.wantLines("ok - file2 c", "1 passed, 0 failed")

	// the root before_each of file2 is gone too
	h.load(`it("d", function() end)`)
	h.run()
	if got := h.eval("count"); got != "1" {
		t.Errorf("file2's before_each ran %s times, want 1", got)
	}
}

// assertion cases: src is the body of one test.
type assertCase struct {
	src  string
	want string // "" = must pass; otherwise the failure must contain it
}

var assertCases = []assertCase{
	// plain assert keeps Lua semantics
	{`local a, b, c = assert(1, "two", 3); assert.equal(1, a); assert.equal("two", b); assert.equal(3, c)`, ""},
	{`assert(false, "custom message")`, "spec_file.lua:1: custom message"},
	{`assert(nil)`, "assertion failed!"},
	{`local ok, e = pcall(assert, false, { code = 1 }); assert.same({ code = 1 }, e)`, ""},

	// equal (raw ==)
	{`assert.are.equal(3, 3); assert.equal("a", "a"); assert.equals(true, true); assert.are.equals(nil, nil)`, ""},
	{`local t = {}; assert.is.equal(t, t)`, ""},
	{`assert.are_not.equal(3, 4); assert.is_not.equal("a", "b"); assert.not_equal({}, {})`, ""},
	{`assert.are.equal(3, 4)`, "spec_file.lua:1: expected: 3, got: 4"},
	{`assert.equal("a", "b")`, `expected: "a", got: "b"`},
	{`assert.equals(1, "1")`, `expected: 1, got: "1"`},
	{`assert.are.equal({ a = 1 }, { a = 1 })`, "expected (table): {a = 1}, got (table): {a = 1} (same contents but different tables"},
	{`assert.are_not.equal(3, 3)`, "expected: not 3, got: 3"},
	{`assert.not_equal("x", "x")`, `expected: not "x", got: "x"`},

	// same (deep)
	{`assert.are.same({ a = { 1, 2, { b = "x" } } }, { a = { 1, 2, { b = "x" } } }); assert.same(1, 1.0); assert.same(0/0, 0/0)`, ""},
	{`local a = {}; a.self = a; local b = {}; b.self = b; assert.same(a, b)`, ""},
	{`assert.are_not.same({ 1 }, { 2 }); assert.is_not.same({ a = 1 }, { a = 1, b = 2 })`, ""},
	{`assert.are.same({ a = 1 }, { a = 2 })`, "expected (table): {a = 1}, got (table): {a = 2} (first difference at .a)"},
	{`assert.same({ 1, { x = 1 } }, { 1, { x = 2 } })`, "(first difference at [2].x)"},
	{`assert.same({ a = 1 }, { a = 1, ["b c"] = 2 })`, `got (table): {a = 1, ["b c"] = 2} (first difference at ["b c"])`},
	{`assert.same({ b = 1, a = 2, "x", [10] = true, [false] = 0, ["end"] = 1 }, {})`,
		`expected (table): {"x", [10] = true, a = 2, b = 1, ["end"] = 1, [false] = 0}, got (table): {}`},
	{`assert.same("a\nb", 1)`, `expected: "a\nb", got: 1`},
	{`assert.are_not.same({ a = 1 }, { a = 1 })`, "expected (table): not same as {a = 1}, got (table): {a = 1}"},
	{`local t = {}; t.me = t; assert.same(t, 1)`, "expected (table): {me = <cycle>}, got: 1"},

	// truthiness and exact values
	{`assert.truthy(0); assert.is_truthy(""); assert.falsy(nil); assert.is_falsy(false); assert.is_not.truthy(nil)`, ""},
	{`assert.is_nil(nil); assert.is_not_nil(false); assert.is_true(true); assert.is_false(false); assert.is_not_true(1)`, ""},
	{`assert.is.Nil(nil); assert.is_not.Nil(1); assert.is.True(true); assert.is.False(false)`, ""},
	{`assert.truthy(nil)`, "expected: truthy value, got: nil"},
	{`assert.is_truthy(false)`, "expected: truthy value, got: false"},
	{`assert.falsy(1)`, "expected: falsy value, got: 1"},
	{`assert.is_nil(1)`, "expected: nil, got: 1"},
	{`assert.is_not_nil(nil)`, "expected: not nil, got: nil"},
	{`assert.is_true(1)`, "expected: true, got: 1"},
	{`assert.is_false(nil)`, "expected: false, got: nil"},

	// types
	{`assert.is_string(""); assert.is_number(1); assert.is_table({}); assert.is_function(print); assert.is_boolean(false); assert.is_not_string(1)`, ""},
	{`assert.is_string(1)`, "expected: value of type string, got (number): 1"},
	{`assert.is_table("x")`, `expected: value of type table, got (string): "x"`},
	{`assert.is_not.number(1)`, "expected: value not of type number, got (number): 1"},

	// errors
	{`assert.has_error(function() error("boom") end)`, ""},
	{`assert.has_error(function() error("boom") end, "boom")`, ""},
	{`assert.has_error(function() error("boom", 0) end, "boom")`, ""},
	{`assert.has.errors(function() error("x") end); assert.has.error(function() error("x") end); assert.errors(function() error("x") end)`, ""},
	{`assert.has_error(function() error({ code = 1 }) end, { code = 1 })`, ""},
	{`assert.has_no_error(function() end); assert.has_no.errors(function() end); assert.no.errors(function() end)`, ""},
	{`assert.has_error(function() end)`, "expected: an error, got: no error"},
	{`assert.has_error(function() end, "boom")`, `expected error: "boom", got: no error`},
	{`assert.has_error(function()
		error("boom")
	end, "bang")`, `expected error: "bang", got error: "spec_file.lua:2: boom"`},
	{`assert.has_error(function() error({ code = 1 }) end, { code = 2 })`, "expected error (table): {code = 2}, got error (table): {code = 1}"},
	{`assert.has_no_error(function() error("boom", 0) end)`, `expected: no error, got error: "boom"`},
	{`assert.has_no.errors(function() error("boom", 0) end)`, `expected: no error, got error: "boom"`},
	{`assert.has_error(nil)`, "expected: a function to call, got (nil): nil"},
	{`assert.has_no_error(function() error("other", 0) end, "boom")`, ""},
	{`assert.has_no_error(function() error("boom", 0) end, "boom")`, `expected: no error equal to "boom", got error: "boom"`},
	{`assert.has_error(function() error(setmetatable({}, { __tostring = function() return "custom obj" end })) end, "custom obj")`, ""},
	{`assert.has_error(function() error({ message = "wrapped" }) end, "wrapped")`, ""},

	// error_matches
	{`assert.error_matches(function() error("code 42 happened") end, "code %d+")`, ""},
	{`assert.error_matches(function() error("a.b") end, "a.b", 1, true)`, ""},
	{`assert.error_matches(function() error("boom 42") end, "^bang")`, `expected: an error matching "^bang", got error: "spec_file.lua:1: boom 42"`},
	{`assert.error_matches(function() end, "x")`, `expected: an error matching "x", got: no error`},
	{`assert.error_matches(function() error("axb") end, "a.b", 1, true)`, `expected: an error matching "a.b"`},
	{`assert.error_matches(function() error("x") end, "y", "why not")`, `why not: expected: an error matching "y"`},

	// near
	{`assert.near(1, 1.05, 0.1); assert.are.near(-2, -2, 0); assert.is_not.near(1, 2, 0.5)`, ""},
	{`assert.near(1, 1.5, 0.1)`, "expected: 1 +/- 0.1, got: 1.5"},
	{`assert.is_not.near(1, 1.05, 0.1)`, "expected: not 1 +/- 0.1, got: 1.05"},
	{`assert.near(1, "1", 0.1)`, "near: expected, actual and tolerance must be numbers"},

	// matches
	{`assert.matches("^%d+$", "123"); assert.matches("a.b", "a.b", 1, true); assert.does_not.match("^x", "abc"); assert.matches("^1", 12)`, ""},
	{`assert.matches("^a", "bcd")`, `expected: string matching "^a", got: "bcd"`},
	{`assert.matches("^a", "bcd", "custom")`, `custom: expected: string matching "^a"`},
	{`assert.does_not.match("b", "abc")`, `expected: string not matching "b", got: "abc"`},
	{`assert.matches("x", {})`, `expected: string matching "x", got (table): {}`},

	// optional message, prepended
	{`assert.are.equal(1, 2, "my message")`, "spec_file.lua:1: my message: expected: 1, got: 2"},
	{`assert.same({}, { 1 }, "deep")`, "deep: expected (table): {}, got (table): {1}"},
	{`assert.is_true(false, "flag")`, "flag: expected: true, got: false"},
	{`assert.has_error(function() end, nil, "must fail")`, "must fail: expected: an error, got: no error"},
	{`assert.near(1, 2, 0.5, "close")`, "close: expected: 1 +/- 0.5, got: 2"},
}

func TestAssertions(t *testing.T) {
	h := newHarness(t, options{pcallAfterLoad: true})
	for i, c := range assertCases {
		h.load("it(\"case\", function() " + c.src + "\nend)")
		p, f, s := h.run()
		out := h.output()
		if c.want == "" {
			if p != 1 || f != 0 || s != 0 {
				t.Errorf("case %d %s: want pass, got:\n%s", i, c.src, out)
			}
			continue
		}
		if p != 0 || f != 1 {
			t.Errorf("case %d %s: want failure, got:\n%s", i, c.src, out)
			continue
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("case %d %s: failure lacks %q:\n%s", i, c.src, c.want, out)
		}
	}
}

// A failing assertion's position is the line that called it, whichever alias
// or namespace it was reached through.
func TestFailurePositionIsTheTestLine(t *testing.T) {
	h := newHarness(t, options{pcallAfterLoad: true})
	h.load(`
it("a", function()
	local x = 1
	assert.is_not.equal(x, 1)
end)
it("b", function()
	assert.has_no.errors(function()
		error("inner", 0)
	end)
end)
it("c", function()
	assert(false, "plain")
end)`)
	h.run()
	out := h.output()
	for _, want := range []string{
		"    spec_file.lua:4: expected: not 1, got: 1",
		`    spec_file.lua:7: expected: no error, got error: "inner"`,
		"    spec_file.lua:12: plain",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// Test bodies (and hooks, and functions given to has_error) may block: the
// runner coroutine yields to Go and the harness resumes it.
func TestYieldingTests(t *testing.T) {
	for _, opt := range []options{{pcallAfterLoad: true}, {pcallBeforeLoad: true}} {
		name := "pcall installed after loading"
		if opt.pcallBeforeLoad {
			name = "pcall installed before loading"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, opt)
			h.load(`
got = {}
describe("blocking", function()
	setup(function() got[#got + 1] = block() end)
	before_each(function() got[#got + 1] = block() end)
	it("in the body", function()
		got[#got + 1] = block()
	end)
	it("inside has_no_error", function()
		assert.has_no_error(function()
			got[#got + 1] = block()
		end)
	end)
	it("inside has_error", function()
		assert.has_error(function()
			got[#got + 1] = block()
			error("after block", 0)
		end, "after block")
	end)
	it("inside error_matches, nested pcall", function()
		assert.error_matches(function()
			local ok, err = pcall(function()
				got[#got + 1] = block()
				error("deep", 0)
			end)
			error("re-raised " .. err, 0)
		end, "^re%-raised deep$")
	end)
	it("fails after blocking", function()
		local v = block()
		got[#got + 1] = v
		assert.are.equal("never", v)
	end)
	after_each(function() got[#got + 1] = block() end)
end)`)
			p, f, s := h.run()
			h.wantCounts(p, f, s, 4, 1, 0)
			if h.blocks != 16 || len(h.wakes) != 16 {
				t.Errorf("block() called %d times, resumed %d times; want 16", h.blocks, len(h.wakes))
			}
			// every block() returned the value the harness resumed it with, in order
			var want []string
			for i := 1; i <= 16; i++ {
				want = append(want, fmt.Sprintf("wake-%d", i))
			}
			if got := h.eval("table.concat(got, ' ')"); got != strings.Join(want, " ") {
				t.Errorf("block() results:\n got: %s\nwant: %s", got, strings.Join(want, " "))
			}
			out := h.output()
			if !strings.Contains(out, "FAIL - blocking fails after blocking\n"+
				`    spec_file.lua:32: expected: "never", got: "wake-15"`) {
				t.Errorf("unexpected output:\n%s", out)
			}
			if !strings.HasSuffix(out, "\n4 passed, 1 failed") {
				t.Errorf("bad summary:\n%s", out)
			}
		})
	}
}

// spec.lua must look pcall up when it calls user code, not cache it at load.
func TestPcallLookedUpAtCallTime(t *testing.T) {
	h := newHarness(t, options{})
	h.exec(`
calls = 0
local base = pcall
pcall = function(...)
	calls = calls + 1
	return base(...)
end`, "count.lua")
	h.load(`
before_each(function() end)
it("a", function() end)
it("b", function() assert.has_error(function() error("x") end) end)`)
	p, f, s := h.run()
	h.wantCounts(p, f, s, 2, 0, 0)
	// 2 bodies + 2 before_each + 1 has_error
	if got := h.eval("calls"); got != "5" {
		t.Errorf("global pcall called %s times, want 5", got)
	}
}
