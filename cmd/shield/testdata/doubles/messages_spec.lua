-- Fixture: every message of the spy and stub assertions and what their
-- method forms return, pinned by the golden file doubles_messages (outside
-- testdata/specs, so that the listing goldens do not change with it).
local function show(...)
  local parts = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if type(v) == "table" then
      local items = {}
      for j = 1, v.n or #v do
        items[j] = tostring(v[j])
      end
      v = "{" .. table.concat(items, ",") .. "}"
    end
    parts[i] = tostring(v)
  end
  error(table.concat(parts, " "), 0)
end

describe("called", function()
  it("never called", function() assert.spy(spy.new()).was.called() end)
  it("called 2 times, once", function() local s = spy.new(); s(); assert.spy(s).was.called(2) end)
  it("not called 1 time, once", function() local s = spy.new(); s(); assert.spy(s).was_not.called(1) end)
  it("at least", function() local s = spy.new(); s(); assert.spy(s).was.called_at_least(3) end)
  it("not at most", function() local s = spy.new(); s(); assert.spy(s).was_not.called_at_most(5) end)
  it("more than, not a number", function() assert.spy(spy.new()).was.called_more_than("x") end)
  it("less than", function() local s = spy.new(); s(); assert.stub(s).was.called_less_than(0) end)
end)

describe("called_with", function()
  it("never called", function() assert.spy(spy.new()).was.called_with(1, "a") end)
  it("with other values", function()
    local s = spy.new(); s(1, { 2 }); s("x")
    assert.spy(s).was.called_with(1, { 3 })
  end)
  it("not, but it was", function() local s = spy.new(); s(1); assert.spy(s).was_not.called_with(1) end)
  it("matchers", function()
    local s = spy.new(); s(5, "five")
    assert.spy(s).was.called_with(match.all_of(match.is_number(), match.is_not_nil()), match.any_of(match.is_table(), match.is_boolean()))
  end)
  it("none_of", function()
    local s = spy.new(); s(5)
    assert.spy(s).was.called_with(match.none_of(match.is_string(), match.is_number()))
  end)
  it("matchers that match", function()
    local s = spy.new(); s(5, "five", {})
    assert.spy(s).was.called_with(match.all_of(match.is_number(), match.is_truthy()), match.any_of(match.is_table(), match.is_string()), match.none_of(match.is_string(), match.is_nil()))
    assert.spy(s).was_not.called_with(match.any_of(match.is_string(), match.is_nil()), match._, match._)
  end)
end)

describe("returned_with", function()
  it("never returned", function() assert.spy(spy.new()).returned_with(1) end)
  it("not, but it did", function()
    local s = spy.new(function(x) return x * 2 end); s(2)
    assert.spy(s).was_not.returned_with(4)
  end)
  it("other results", function()
    local s = spy.new(function(x) return x, "y" end); s(1); s(2)
    assert.spy(s).returned_with(3, "y")
  end)
end)

describe("method forms", function()
  it("called", function() local s = spy.new(); s(); s(); show(s:called(), s:called(2), s:called(3)) end)
  it("called_with found", function() local s = spy.new(); s(1, 2); s(3); show(s:called_with({ 1, 2 })) end)
  it("called_with not found", function() local s = spy.new(); s(1, 2); s(3); show(s:called_with({ 9 })) end)
  it("called_with never called", function() show(spy.new():called_with({ 9 })) end)
  it("called_with n", function() local s = spy.new(); s(nil, 1); show(s:called_with({ n = 2, nil, 1 })) end)
  it("called_with no list", function() spy.new():called_with(5) end)
  it("returned_with found", function() local s = spy.new(function(x) return x + 1 end); s(1); s(5); show(s:returned_with({ 2 })) end)
  it("returned_with not found", function() local s = spy.new(function(x) return x + 1 end); s(1); s(5); show(s:returned_with({ 3 })) end)
  it("returned_with never returned", function() show(spy.new():returned_with({ 3 })) end)
end)

describe("stubs", function()
  it("returns", function()
    local t = { f = function() return "real" end }
    stub(t, "f").returns(1, nil, 3)
    show(select("#", t.f()), t.f())
  end)
  it("on_call_with", function()
    local t = { f = function() return "real" end }
    stub(t, "f").returns("default")
    t.f.on_call_with(1).returns("one", "uno")
    t.f.on_call_with(2).invokes(function(x) return "two:" .. x end)
    show(t.f(1), t.f(2), t.f(3), select("#", t.f(1)))
  end)
  it("invokes", function()
    local s = stub.new().invokes(function(a, b) return b, a end)
    show(s("a", "b"))
  end)
end)
