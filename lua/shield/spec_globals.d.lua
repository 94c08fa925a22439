---@meta
-- LuaLS type definitions for the globals of a spec file run by `shield test`
-- (busted's describe/it/hooks, luassert's assert/spy/stub/mock/match). For
-- editors only: the runtime never loads this file. The types themselves
-- are in spec.d.lua; point LuaLS at this directory (docs/testing.md shows
-- a .luarc.json).

--- Registers a block of tests; fn runs now and registers what is inside.
---@param name string
---@param fn fun()
function describe(name, fn) end

--- The same as describe.
---@param name string
---@param fn fun()
function context(name, fn) end

--- A describe block whose changes to _G and package.loaded are undone when
--- it ends (at registration and after its tests ran).
---@param name string
---@param fn fun()
function insulate(name, fn) end

--- A describe block whose globals stay for the rest of the file (every
--- block but insulate does that; files never share globals).
---@param name string
---@param fn fun()
function expose(name, fn) end

--- Registers a test; without fn it is pending. "#tag" words in the name are
--- what --tags/--exclude-tags select on. The body may block (it runs as a
--- task, bounded by --timeout).
---@param name string
---@param fn? fun()
function it(name, fn) end

--- Registers a pending test; inside a running test, ends it as pending.
---@param name string
---@param fn? fun()
function pending(name, fn) end

--- Inside a running test: fn runs once the body is over (failed or not),
--- before after_each. Every finally given runs, the last given first.
---@param fn fun()
function finally(fn) end

--- Runs fn before each test of the enclosing block (and its sub-blocks).
---@param fn fun()
function before_each(fn) end

--- Runs fn after each test of the enclosing block (and its sub-blocks).
---@param fn fun()
function after_each(fn) end

--- Runs fn once before the tests of the enclosing block.
---@param fn fun()
function setup(fn) end

--- Runs fn once after the tests of the enclosing block.
---@param fn fun()
function teardown(fn) end

---@param fn fun()
function lazy_setup(fn) end

---@param fn fun()
function lazy_teardown(fn) end

---@param fn fun()
function strict_setup(fn) end

---@param fn fun()
function strict_teardown(fn) end

--- luassert's assertions (see shield.spec_assert in spec.d.lua).
---@type shield.spec_assert
assert = nil

--- Spies: spy.new(fn), spy.on(obj, "name"), spy(fn).
---@type shield.spy_module
spy = nil

--- Stubs: stub(obj, "name"[, returns...]), stub.new().
---@type shield.stub_module
stub = nil

--- mock(t [, dostub]) and mock.revert(t).
---@type shield.mock_module
mock = nil

--- Argument matchers for called_with/returned_with.
---@type shield.match
match = nil
