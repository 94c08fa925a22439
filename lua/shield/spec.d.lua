---@meta shield.spec
-- LuaLS type definitions for require("shield.spec"), the busted/luassert-
-- compatible spec runner of shield_global (lua/shield/spec.lua; `shield test`
-- uses it). For editors only: the runtime never loads this file.
--
--   local spec = require("shield.spec")
--   spec.install(_G)            -- describe/it/pending/hooks/assert into _G
--   describe("boss", function()
--     it("dies", function() assert.are.equal(0, hp()) end)
--   end)
--   local passed, failed, skipped = spec.run(print)
--
-- describe()/it() only register tests; run() runs them. Test bodies and hooks
-- may block (they run as tasks under `shield test`).

---@class shield.spec
local spec = {}

--- Options of spec.run; all optional.
---@class shield.spec_run_opts
---@field call? fun(fn: function, name: string): boolean, any, string? runs user code instead of the global pcall, returning like pcall (and the traceback of an error value that carries none)
---@field report? fun(kind: "ok"|"fail"|"error"|"pending"|"list", name: string, text?: string, pos?: string) told each result as it happens; pos is the "file:line" of the test's it()
---@field summary? boolean false: no summary line
---@field filter? string[] Lua patterns: only tests whose full name matches one run
---@field filter_out? string[] Lua patterns: tests whose full name matches one do not run (wins over filter)
---@field tags? string[] only tests whose full name has one of these "#tag"s run
---@field exclude_tags? string[] tests with one of these "#tag"s do not run (wins over tags)
---@field rand? fun(n: integer): integer given: the tests of each block run shuffled, rand(n) drawing 1..n
---@field list? boolean report each selected test as "list" instead of running it

--- The luassert-style assertions. assert(v [, msg]) raises unless v is
--- truthy and returns all its arguments. Each assertion is reached under the
--- prefixes is_/are_/has_/does_/was_ (or as assert.is.x, assert.are.x, ...)
--- and negated under not_/is_not_/are_not_/has_no_/no_/does_not_/was_not_
--- (assert.is_not.x, ...); an unknown name raises naming it. Every assertion
--- takes an optional failure message after its arguments.
---@class shield.spec_assert
---@overload fun(v: any, msg?: any, ...: any): any
---@field is shield.spec_assert
---@field are shield.spec_assert
---@field has shield.spec_assert
---@field does shield.spec_assert
---@field was shield.spec_assert
---@field is_not shield.spec_assert
---@field are_not shield.spec_assert
---@field has_no shield.spec_assert
---@field no shield.spec_assert
---@field does_not shield.spec_assert
---@field was_not shield.spec_assert
---@field equal fun(expected: any, actual: any, msg?: any) rawequal
---@field equals fun(expected: any, actual: any, msg?: any)
---@field same fun(expected: any, actual: any, msg?: any) deep comparison
---@field truthy fun(v: any, msg?: any)
---@field falsy fun(v: any, msg?: any)
---@field near fun(expected: number, actual: number, tolerance: number, msg?: any)
---@field error fun(fn: function, expected?: any, msg?: any) fn raises (an error equal to expected, when given)
---@field errors fun(fn: function, expected?: any, msg?: any)
---@field error_matches fun(fn: function, pattern: string, init?: integer, plain?: boolean, msg?: any)
---@field error_match fun(fn: function, pattern: string, init?: integer, plain?: boolean, msg?: any)
---@field matches_error fun(fn: function, pattern: string, init?: integer, plain?: boolean, msg?: any)
---@field matches fun(pattern: string, s: string, init?: integer, plain?: boolean, msg?: any)
---@field match fun(pattern: string, s: string, init?: integer, plain?: boolean, msg?: any)
---@field Nil fun(v: any, msg?: any)
---@field True fun(v: any, msg?: any)
---@field False fun(v: any, msg?: any)
---@field boolean fun(v: any, msg?: any) a value of that type
---@field number fun(v: any, msg?: any)
---@field string fun(v: any, msg?: any)
---@field table fun(v: any, msg?: any)
---@field userdata fun(v: any, msg?: any)
---@field thread fun(v: any, msg?: any)
---@field ["function"] fun(v: any, msg?: any)
---@field ["nil"] fun(v: any, msg?: any)
---@field ["true"] fun(v: any, msg?: any)
---@field ["false"] fun(v: any, msg?: any)
---@field is_true fun(v: any, msg?: any) (one of the prefixed forms, listed for completion)
---@field is_false fun(v: any, msg?: any)
---@field is_nil fun(v: any, msg?: any)
---@field is_not_nil fun(v: any, msg?: any)
---@field is_truthy fun(v: any, msg?: any)
---@field is_falsy fun(v: any, msg?: any)
---@field are_equal fun(expected: any, actual: any, msg?: any)
---@field are_same fun(expected: any, actual: any, msg?: any)
---@field are_not_equal fun(expected: any, actual: any, msg?: any)
---@field has_error fun(fn: function, expected?: any, msg?: any)
---@field has_no_error fun(fn: function, expected?: any, msg?: any)
---@field spy fun(s: shield.spy): shield.spy_assert assertions on a spy's calls: assert.spy(s).was.called()
---@field stub fun(s: shield.spy): shield.spy_assert the same for a stub

--- Registers a block of tests (context is the same function).
---@param name string
---@param fn fun()
function spec.describe(name, fn) end

--- Registers a test; without fn it is pending.
---@param name string
---@param fn? fun()
function spec.it(name, fn) end

--- Registers a pending test; inside a running test, ends it as pending.
---@param name string
---@param fn? fun()
function spec.pending(name, fn) end

--- Runs fn before each test of the enclosing block (and its sub-blocks).
---@param fn fun()
function spec.before_each(fn) end

--- Runs fn after each test of the enclosing block (and its sub-blocks).
---@param fn fun()
function spec.after_each(fn) end

--- Runs fn once before the tests of the enclosing block.
---@param fn fun()
function spec.setup(fn) end

--- Runs fn once after the tests of the enclosing block.
---@param fn fun()
function spec.teardown(fn) end

--- Defines describe/context, insulate, expose, it, pending, finally,
--- before_each, after_each, setup/teardown (and the lazy_/strict_ aliases),
--- assert, spy, stub, mock and match in env.
---@param env? table default _G
---@return table env
function spec.install(env) end

--- Runs and reports the registered tests (one write(line) per line:
--- "ok - ...", "FAIL - ..." (an assertion did not hold) or "ERROR - ..."
--- (any other error) with the indented message, "PENDING - ...", then
--- "<N> passed, <N> failed[, <N> errors][, <N> skipped]"), then drops them.
---@param write? fun(line: string) default print
---@param opts? shield.spec_run_opts
---@return integer passed
---@return integer failed assertions that did not hold
---@return integer skipped
---@return integer errors every other error
function spec.run(write, opts) end

--- Drops every registered test.
function spec.reset() end

---@type shield.spec_assert
spec.assert = nil

--- The deterministic value printer used in failure messages.
---@param v any
---@return string
function spec.serialize(v) end

--- The deep comparison behind assert.same.
---@param a any
---@param b any
---@return boolean
function spec.same(a, b) end

--- Notes an assertion failure's text, so a test that raises it counts as
--- failed rather than errored (for assertions written outside shield.spec).
---@param text string
function spec.record_failure(text) end

---------------------------------------------------------------------------
-- Test doubles (luassert's spy/stub/mock/match). Spies and stubs made while
-- a test runs are reverted when it ends; those made in setup, after the
-- block's teardown.
---------------------------------------------------------------------------

--- One recorded call or return: the values as deep copies taken at the
--- time (vals) and the values themselves (refs, for match.is_ref).
---@class shield.spy_call
---@field vals { n: integer, [integer]: any }
---@field refs { n: integer, [integer]: any }

--- A spy: callable like the function it wraps; records every call.
---@class shield.spy
---@overload fun(...: any): ...
---@field calls shield.spy_call[]
---@field returnvals shield.spy_call[]
---@field callback? function the function called (the original for spy.on)
local spy_obj = {}

--- Forgets the recorded calls and returns.
---@return shield.spy
function spy_obj:clear() end

--- Puts the original function back (spy.on, stub(obj, key), mock).
---@return shield.spy
function spy_obj:revert() end

--- Whether the spy was called (n times, when n is given), and how often.
---@param n? integer
---@return boolean
---@return integer count
function spy_obj:called(n) end

--- Whether a call had exactly the values of the list args (deep-equal, or
--- accepted by the matcher in their place): luassert's method form,
--- s:called_with({1, "a"}). Also returns the matching call's values, or the
--- last call's.
---@param args any[]
---@return boolean
---@return { n: integer, [integer]: any }? values
function spy_obj:called_with(args) end

--- Whether a call returned exactly the values of the list results.
---@param results any[]
---@return boolean
---@return { n: integer, [integer]: any }? values
function spy_obj:returned_with(results) end

--- A stub: a spy that does not call the original function.
---@class shield.stub: shield.spy
---@overload fun(...: any): ...
---@field returns fun(...: any): shield.stub every call returns these values
---@field invokes fun(fn: function): shield.stub every call calls fn instead
---@field on_call_with fun(...: any): shield.stub_rule calls with these arguments only (the last matching rule wins)

---@class shield.stub_rule
---@field returns fun(...: any): shield.stub
---@field invokes fun(fn: function): shield.stub

---@class shield.spy_module
---@overload fun(fn?: function): shield.spy
local spy_module = {}

--- A spy that calls fn (if any) and records the calls.
---@param fn? function
---@return shield.spy
function spy_module.new(fn) end

--- Replaces obj[key] with a spy that still calls the original.
---@param obj table
---@param key any
---@return shield.spy
function spy_module.on(obj, key) end

---@param v any
---@return boolean
function spy_module.is_spy(v) end

--- stub(obj, key, ...): replaces obj[key] with a stub returning ...;
--- stub() / stub.new(): a stub not attached to anything.
---@class shield.stub_module
---@overload fun(obj?: table, key?: any, ...: any): shield.stub
local stub_module = {}

---@param obj? table
---@param key? any
---@param ... any the values every call returns
---@return shield.stub
function stub_module.new(obj, key, ...) end

---@param v any
---@return boolean
function stub_module.is_stub(v) end

--- mock(t [, dostub]): every function in t (and in the tables it holds)
--- becomes a spy (a stub when dostub); returns t.
---@class shield.mock_module
---@overload fun(t: table, dostub?: boolean): table
local mock_module = {}

--- Puts back every function mock() replaced in t.
---@param t table
---@return table
function mock_module.revert(t) end

--- A matcher stands for an argument in called_with/returned_with.
---@class shield.matcher

--- Matchers. Every one has the prefixes is_/are_/has_ (match.is_string())
--- and the negated not_/is_not_/are_not_/has_no_ (match.is_not_nil()).
---@class shield.match
---@field _ shield.matcher any value
---@field is_string fun(): shield.matcher
---@field is_number fun(): shield.matcher
---@field is_table fun(): shield.matcher
---@field is_function fun(): shield.matcher
---@field is_boolean fun(): shield.matcher
---@field is_userdata fun(): shield.matcher
---@field is_thread fun(): shield.matcher
---@field is_nil fun(): shield.matcher
---@field is_true fun(): shield.matcher
---@field is_false fun(): shield.matcher
---@field is_truthy fun(): shield.matcher
---@field is_falsy fun(): shield.matcher
---@field is_not_nil fun(): shield.matcher
---@field is_equal fun(v: any): shield.matcher rawequal
---@field is_same fun(v: any): shield.matcher deep comparison
---@field is_ref fun(v: any): shield.matcher this very table or function
---@field matches fun(pattern: string, init?: integer, plain?: boolean): shield.matcher
---@field is_all_of fun(...: shield.matcher): shield.matcher
---@field is_any_of fun(...: shield.matcher): shield.matcher
---@field is_none_of fun(...: shield.matcher): shield.matcher
---@field is_matcher fun(v: any): boolean

--- assert.spy(s) / assert.stub(s): words was/is/has/does/are are
--- optional, not/was_not/is_not/has_no negate:
--- assert.spy(s).was.called(2), assert.spy(s).was_not.called_with(1).
---@class shield.spy_assert
---@field was shield.spy_assert
---@field is shield.spy_assert
---@field has shield.spy_assert
---@field does shield.spy_assert
---@field are shield.spy_assert
---@field was_not shield.spy_assert
---@field is_not shield.spy_assert
---@field has_no shield.spy_assert
---@field ["not"] shield.spy_assert
---@field called fun(n?: integer) called (n times)
---@field called_with fun(...: any) some call had these arguments
---@field returned_with fun(...: any) some call returned these values
---@field called_at_least fun(n: integer)
---@field called_at_most fun(n: integer)
---@field called_more_than fun(n: integer)
---@field called_less_than fun(n: integer)
---@field was_called fun(n?: integer)
---@field was_not_called fun(n?: integer)
---@field was_called_with fun(...: any)
---@field was_not_called_with fun(...: any)

return spec
