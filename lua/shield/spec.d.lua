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
---@field call? fun(fn: function, name: string): boolean, any runs user code instead of the global pcall, returning like pcall
---@field report? fun(kind: "ok"|"fail"|"pending", name: string, text?: string) told each result as it happens
---@field summary? boolean false: no summary line

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

--- Defines describe/context, it, pending, before_each, after_each,
--- setup/teardown (and the lazy_/strict_ aliases) and assert in env.
---@param env? table default _G
---@return table env
function spec.install(env) end

--- Runs and reports the registered tests (one write(line) per line:
--- "ok - ...", "FAIL - ..." with the indented message, "PENDING - ...",
--- then "<N> passed, <N> failed[, <N> skipped]"), then drops them.
---@param write? fun(line: string) default print
---@param opts? shield.spec_run_opts
---@return integer passed
---@return integer failed
---@return integer skipped
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

return spec
