-- Fixture of the golden tests: spies, stubs, mocks, matchers, finally,
-- insulate/expose.
local inventory = {
  items = {},
  add = function(self, id, n) self.items[id] = (self.items[id] or 0) + n; return self.items[id] end,
  load = function(id) error("would hit the database") end,
}

describe("spy", function()
  it("records calls and returns", function()
    local double = spy.new(function(x) if type(x) == "number" then return x * 2 end end)
    assert.are.equal(42, double(21))
    double("a", { 1 })
    assert.spy(double).was.called(2)
    assert.spy(double).was.called_with(21)
    assert.spy(double).was.called_with(match.is_string(), match._)
    assert.spy(double).was_not.called_with(22)
    assert.spy(double).was.returned_with(42)
    assert.spy(double).was.called_at_least(1)
    assert.is_true((double:called_with({ 21 })))
    assert.is_false((double:called_with({ 22 })))
    assert.are.same({ true, 2 }, { double:called(2) })
  end)

  it("spy.on keeps the original and is reverted after the test", function()
    spy.on(inventory, "add")
    assert.are.equal(3, inventory:add("sword", 3))
    assert.spy(inventory.add).was.called_with(match.is_ref(inventory), "sword", 3)
  end)

  it("the previous test's spy is gone", function()
    assert.is_false(spy.is_spy(inventory.add))
  end)

  it("called_with compares arguments as they were at the call", function()
    local s = spy.new(function() end)
    local t = { n = 1 }
    s(t)
    t.n = 2
    assert.spy(s).was.called_with({ n = 1 })
  end)

  it("fails with what was called", function()
    local s = spy.new(function() end)
    s(1, "two")
    assert.spy(s).was.called_with(1, "three")
  end)

  it("fails on a call count", function()
    local s = spy.new(function() end)
    assert.spy(s).was.called(1)
  end)
end)

describe("stub", function()
  it("replaces a function and returns what it is told", function()
    stub(inventory, "load").returns({ id = 7 }, nil)
    local item, err = inventory.load(7)
    assert.are.same({ id = 7 }, item)
    assert.is_nil(err)
    assert.stub(inventory.load).was.called_with(7)
  end)

  it("on_call_with picks a result by arguments", function()
    local s = stub.new()
    s.on_call_with("a").returns(1)
    s.on_call_with("b").returns(2)
    assert.are.equal(1, s("a"))
    assert.are.equal(2, s("b"))
    assert.is_nil(s("c"))
  end)

  it("invokes a function", function()
    local s = stub(inventory, "load").invokes(function(id) return "item " .. id end)
    assert.are.equal("item 9", inventory.load(9))
    s:revert()
    assert.has_error(function() inventory.load(9) end)
  end)
end)

describe("mock", function()
  it("spies every function of a table", function()
    local m = mock({ f = function() return 1 end, sub = { g = function() return 2 end } })
    assert.are.equal(1, m.f())
    assert.are.equal(2, m.sub.g())
    assert.spy(m.f).was.called(1)
    assert.spy(m.sub.g).was.called(1)
  end)

  it("stubs them with true", function()
    local m = mock({ f = function() return 1 end }, true)
    assert.is_nil(m.f())
    assert.stub(m.f).was.called()
  end)
end)

describe("match", function()
  it("composes", function()
    local s = spy.new(function() end)
    s(5, "x", nil)
    assert.spy(s).was.called_with(match.is_number(), match.is_all_of(match.is_string(), match.matches("^x$")), match.is_nil())
    assert.spy(s).was.called_with(match.is_any_of(match.is_table(), match.is_equal(5)), match.is_not_number(), match._)
  end)
end)

describe("finally", function()
  local log = {}
  it("runs after the body even when it fails", function()
    finally(function() log[#log + 1] = "cleaned" end)
    error("boom", 0)
  end)
  it("ran", function()
    assert.are.same({ "cleaned" }, log)
  end)
end)

insulate("insulate", function()
  it("sets a global", function()
    leaked_global = true
  end)
end)

describe("after insulate", function()
  it("the global is gone", function()
    assert.is_nil(leaked_global)
  end)
end)

expose("expose", function()
  it("sets a global", function()
    kept_global = true
  end)
end)

describe("after expose", function()
  it("the global stays", function()
    assert.is_true(kept_global)
  end)
end)

describe("blocking", function()
  it("a spy of a function that blocks", function()
    local s = spy.new(function(ms) shield.sleep(ms); return "woke" end)
    assert.are.equal("woke", s(5))
    assert.spy(s).was.called_with(5)
  end)

  it("spy.on a capability, reverted after the test", function()
    spy.on(shield, "sleep")
    shield.sleep(1)
    assert.spy(shield.sleep).was.called_with(1)
  end)

  it("shield.sleep is itself again", function()
    assert.is_false(spy.is_spy(shield.sleep))
  end)
end)
