-- shield.spec test doubles: spy, stub, mock and match with luassert's
-- semantics. The embedding prepends this file to spec.lua (one chunk), which
-- calls make_doubles(internals) once; spec.install puts spy/stub/mock/match
-- into the spec file's globals and spec.run reverts the doubles a test made
-- when it ends (busted's snapshot).
--
--   local s = spy.new(function(x) return x * 2 end)
--   s(21); assert.spy(s).was.called_with(21); assert.spy(s).was.returned_with(42)
--   spy.on(obj, "save")                  -- wraps obj.save, still calls it
--   stub(obj, "load").returns(nil, "not_found")
--   mock(obj [, true])                   -- every function of obj spied (stubbed)
--   assert.spy(obj.save).was.called(1); assert.stub(obj.load).was_not.called()
--   assert.spy(s).was.called_with(match.is_string(), match._)
--
-- Arguments are recorded as deep copies taken at call time (match.is_ref
-- compares the original references), as luassert does.

local function make_doubles(internals)
  local same = internals.same -- (a, b, seen, path) -> ok, path
  local serialize = internals.serialize
  local record_failure = internals.record_failure
  local LEVEL = internals.level
  local assert_tbl = internals.assert

  local type, select, error, tostring = type, select, error, tostring
  local setmetatable, getmetatable, rawget, rawequal = setmetatable, getmetatable, rawget, rawequal
  local pairs, next = pairs, next
  local sfind, tconcat, unpack_ = string.find, table.concat, unpack or table.unpack

  local D = {}

  ---------------------------------------------------------------------------
  -- matchers
  ---------------------------------------------------------------------------
  local MATCHER_MT = { __tostring = function(m) return "match." .. m.name end }

  local function matcher(name, test, is_ref)
    return setmetatable({ name = name, test = test, ref = is_ref }, MATCHER_MT)
  end

  local function is_matcher(v)
    return type(v) == "table" and getmetatable(v) == MATCHER_MT
  end

  local function deep_same(a, b)
    return (same(a, b, {}, ""))
  end

  local builders = {
    equal = function(expected) return function(v) return rawequal(v, expected) end end,
    same = function(expected) return function(v) return deep_same(expected, v) end end,
    truthy = function() return function(v) return v ~= nil and v ~= false end end,
    falsy = function() return function(v) return v == nil or v == false end end,
    ["true"] = function() return function(v) return v == true end end,
    ["false"] = function() return function(v) return v == false end end,
    ["nil"] = function() return function(v) return v == nil end end,
    matches = function(pattern, init, plain)
      return function(v)
        if type(v) == "number" then
          v = tostring(v)
        end
        return type(v) == "string" and sfind(v, pattern, init, plain) ~= nil
      end
    end,
  }
  -- all_of, any_of, none_of: the first matcher of the list whose test is
  -- truthy (or falsy: hit) decides result; without one, the opposite
  local function combinator(hit, result)
    return function(...)
      local ms = { ... }
      return function(v, ref)
        for i = 1, #ms do
          if (not ms[i].test(ms[i].ref and ref or v)) ~= hit then
            return result
          end
        end
        return not result
      end
    end
  end
  builders.all_of = combinator(false, false)
  builders.any_of = combinator(true, true)
  builders.none_of = combinator(true, false)
  builders.equals, builders.match = builders.equal, builders.matches
  for _, tname in pairs({ "string", "number", "table", "function", "boolean", "userdata", "thread" }) do
    builders[tname] = function() return function(v) return type(v) == tname end end
  end

  local match = { _ = matcher("_", function() return true end) }
  match.is_matcher = is_matcher
  -- match.is_ref(obj): the very same table/function was passed
  local function ref_builder(obj)
    return matcher("is_ref", function(v) return rawequal(v, obj) end, true)
  end
  match.ref, match.is_ref = ref_builder, ref_builder

  local POS = { "", "is_", "are_", "has_" }
  local NEG = { "not_", "is_not_", "are_not_", "has_no_" }
  for name, build in pairs(builders) do
    local pos = function(...)
      return matcher(name, build(...))
    end
    local neg = function(...)
      local test = build(...)
      return matcher("not " .. name, function(v, ref) return not test(v, ref) end)
    end
    for i = 1, #POS do
      match[POS[i] .. name] = pos
    end
    for i = 1, #NEG do
      match[NEG[i] .. name] = neg
    end
  end
  setmetatable(match, {
    __index = function(_, k)
      error("unknown matcher 'match." .. tostring(k) .. "'", 2)
    end,
  })
  D.match = match

  ---------------------------------------------------------------------------
  -- argument lists
  ---------------------------------------------------------------------------
  local function deepcopy(v, seen)
    if type(v) ~= "table" or is_matcher(v) or getmetatable(v) ~= nil and rawget(getmetatable(v), "__spy") then
      return v
    end
    seen = seen or {}
    if seen[v] then
      return seen[v]
    end
    local c = {}
    seen[v] = c
    local k = next(v)
    while k ~= nil do
      c[deepcopy(k, seen)] = deepcopy(rawget(v, k), seen)
      k = next(v, k)
    end
    local mt = getmetatable(v)
    if type(mt) == "table" then -- not a protected (__metatable) one
      setmetatable(c, mt)
    end
    return c
  end

  local function pack(...)
    local n = select("#", ...)
    local vals, refs = { n = n }, { n = n }
    for i = 1, n do
      local v = (select(i, ...))
      refs[i] = v
      vals[i] = deepcopy(v)
    end
    return { vals = vals, refs = refs }
  end

  -- a recorded call (or return) matches the expected values: same count,
  -- each value deep-equal or accepted by the matcher in its place
  local function args_match(rec, expected)
    if rec.vals.n ~= expected.n then
      return false
    end
    for i = 1, expected.n do
      local e = expected[i]
      if is_matcher(e) then
        if not e.test(e.ref and rec.refs[i] or rec.vals[i], rec.refs[i]) then
          return false
        end
      elseif not deep_same(e, rec.vals[i]) then
        return false
      end
    end
    return true
  end

  local function show_args(list)
    local parts = {}
    for i = 1, list.n do
      local v = list[i]
      parts[i] = is_matcher(v) and tostring(v) or serialize(v)
    end
    return "(" .. tconcat(parts, ", ") .. ")"
  end

  ---------------------------------------------------------------------------
  -- spies
  ---------------------------------------------------------------------------
  -- made in the current scopes, in order; scope_end reverts back to a mark
  local made = {}

  function D.scope_begin()
    return #made
  end

  function D.scope_end(mark)
    for i = #made, mark + 1, -1 do
      local s = made[i]
      made[i] = nil
      s:revert()
    end
  end

  local SPY_MT = { __spy = true }
  SPY_MT.__index = SPY_MT

  local function is_spy(v)
    return type(v) == "table" and getmetatable(v) == SPY_MT
  end

  -- results of the wrapped function recorded, then returned
  local function record_return(s, ...)
    s.returnvals[#s.returnvals + 1] = pack(...)
    return ...
  end

  SPY_MT.__call = function(s, ...)
    s.calls[#s.calls + 1] = pack(...)
    local fn = s.callback
    for i = 1, #s._rules do
      local oc = s._rules[i]
      if args_match(s.calls[#s.calls], oc.args) then
        fn = oc.callback
      end
    end
    if fn == nil then
      return record_return(s)
    end
    return record_return(s, fn(...))
  end

  function SPY_MT:clear()
    self.calls, self.returnvals = {}, {}
    return self
  end

  function SPY_MT:revert()
    if self.target ~= nil then
      self.target[self.key] = self.original
      self.target = nil
    end
    return self
  end

  -- the first recorded call (or return) matching expected, a list with n
  local function find(list, expected)
    for i = 1, #list do
      if args_match(list[i], expected) then
        return list[i]
      end
    end
  end

  local function arglist(args)
    if type(args) ~= "table" then
      error("a list of arguments expected (luassert's form: s:called_with({1, 2})), got " .. type(args), 3)
    end
    if args.n == nil then
      local t = { n = #args }
      for i = 1, t.n do
        t[i] = args[i]
      end
      return t
    end
    return args
  end

  -- s:called([times]) -> whether it was called (times times), the count
  function SPY_MT:called(times)
    if times == nil then
      return #self.calls > 0, #self.calls
    end
    return #self.calls == times, #self.calls
  end

  -- whether a record of list (calls or returns) has the values of the
  -- list expected, and those values or the last record's
  local function lookup(list, expected)
    local found = find(list, expected)
    if found then
      return true, found.vals
    end
    local last = list[#list]
    return false, last and last.vals
  end

  -- s:called_with(args) -> whether a call had the values of the list args
  -- (luassert's method form takes a table), and those values or the last
  -- call's
  function SPY_MT:called_with(args)
    return lookup(self.calls, arglist(args))
  end

  -- s:returned_with(results) -> whether a call returned the values of the
  -- list results, and those values or the last call's results
  function SPY_MT:returned_with(results)
    return lookup(self.returnvals, arglist(results))
  end

  local function new_spy(callback)
    if callback ~= nil and not (type(callback) == "function" or is_spy(callback)
        or type(getmetatable(callback)) == "table" and getmetatable(callback).__call) then
      error("spy.new: function expected, got " .. type(callback), 3)
    end
    local s = setmetatable({ calls = {}, returnvals = {}, callback = callback, _rules = {} }, SPY_MT)
    return s
  end

  local function attach(s, target, key)
    s.target, s.key, s.original = target, key, target[key]
    target[key] = s
    made[#made + 1] = s
    return s
  end

  local spy = {}
  function spy.new(callback)
    return new_spy(callback)
  end
  -- spy.on(obj, "name"): obj.name becomes a spy that still calls the original
  function spy.on(target, key)
    if type(target) ~= "table" then
      error("spy.on: table expected, got " .. type(target), 2)
    end
    return attach(new_spy(target[key]), target, key)
  end
  spy.is_spy = is_spy
  setmetatable(spy, { __call = function(_, callback) return new_spy(callback) end })
  D.spy = spy

  -- stub: a spy that does not call the original; returns what .returns gave
  -- or what .invokes's function returns
  local function returning(...)
    local vals = { n = select("#", ...), ... }
    return function() return unpack_(vals, 1, vals.n) end
  end
  local function add_stub_api(s)
    s.returns = function(...)
      s.callback = returning(...)
      return s
    end
    s.invokes = function(fn)
      s.callback = fn
      return s
    end
    -- stub(o, "f").on_call_with(1).returns("one"): for calls with those
    -- arguments only (the last matching rule wins)
    s.on_call_with = function(...)
      local rule = { args = { n = select("#", ...), ... } }
      s._rules[#s._rules + 1] = rule
      return {
        returns = function(...)
          rule.callback = returning(...)
          return s
        end,
        invokes = function(fn)
          rule.callback = fn
          return s
        end,
      }
    end
    return s
  end

  local function new_stub(target, key, ...)
    local s = add_stub_api(new_spy())
    if select("#", ...) > 0 then
      s.returns(...)
    end
    if target == nil and key == nil then
      return s
    end
    if type(target) ~= "table" then
      error("stub: table expected, got " .. type(target), 3)
    end
    return attach(s, target, key)
  end

  local stub = { new = function(target, key, ...) return new_stub(target, key, ...) end, is_stub = is_spy }
  setmetatable(stub, { __call = function(_, target, key, ...) return new_stub(target, key, ...) end })
  D.stub = stub

  -- mock(t [, dostub]): every function in t (and in the tables it holds)
  -- replaced by a spy (a stub when dostub); mock.revert(t) undoes it
  local function mock_walk(t, dostub, seen)
    if seen[t] then
      return
    end
    seen[t] = true
    local keys = {}
    for k in pairs(t) do
      keys[#keys + 1] = k
    end
    for i = 1, #keys do
      local k = keys[i]
      local v = t[k]
      if type(v) == "function" then
        if dostub then
          attach(add_stub_api(new_spy()), t, k)
        else
          attach(new_spy(v), t, k)
        end
      elseif type(v) == "table" and not is_spy(v) then
        mock_walk(v, dostub, seen)
      end
    end
  end

  local mock = {}
  function mock.revert(t, seen)
    seen = seen or {}
    if seen[t] then
      return t
    end
    seen[t] = true
    for _, v in pairs(t) do
      if is_spy(v) then
        v:revert()
      elseif type(v) == "table" then
        mock.revert(v, seen)
      end
    end
    return t
  end
  setmetatable(mock, {
    __call = function(_, t, dostub)
      if type(t) ~= "table" then
        error("mock: table expected, got " .. type(t), 2)
      end
      mock_walk(t, dostub, {})
      return t
    end,
  })
  D.mock = mock

  ---------------------------------------------------------------------------
  -- assert.spy(s) / assert.stub(s)
  ---------------------------------------------------------------------------
  local function times(n)
    return n .. (n == 1 and " time" or " times")
  end

  local function last_call(s)
    local c = s.calls[#s.calls]
    if not c then
      return "never called"
    end
    return "last called with " .. show_args(c.vals)
  end

  -- the start of every failure message of a check
  local function expected_the_spy(neg, what)
    return "expected the spy " .. (neg and "not " or "") .. what
  end

  -- whether (as neg wants) a record of list has the values ..., and those
  -- values as a list
  local function recorded(list, neg, ...)
    local expected = { n = select("#", ...), ... }
    return (find(list, expected) ~= nil) ~= neg, expected
  end

  -- name -> check(s, neg, ...) returning ok, text
  local checks = {}
  checks.called = function(s, neg, n)
    local count = #s.calls
    local ok
    if n == nil then
      ok = count > 0
    else
      ok = count == n
    end
    if ok ~= neg then
      return true
    end
    if n == nil then
      return false, neg and ("expected the spy not to be called, but it was called " .. times(count))
        or "expected the spy to be called, but it was never called"
    end
    return false, expected_the_spy(neg, "to be called " .. times(n) .. ", but it was called " .. times(count))
  end
  local function bound(word, cmp)
    return function(s, neg, n)
      if type(n) ~= "number" then
        return false, word .. ": number of calls expected, got " .. type(n)
      end
      local count = #s.calls
      if cmp(count, n) ~= neg then
        return true
      end
      return false, expected_the_spy(neg, "to be called " .. word .. " " .. times(n) .. ", but it was called " .. times(count))
    end
  end
  checks.called_at_least = bound("at least", function(c, n) return c >= n end)
  checks.called_at_most = bound("at most", function(c, n) return c <= n end)
  checks.called_more_than = bound("more than", function(c, n) return c > n end)
  checks.called_less_than = bound("less than", function(c, n) return c < n end)
  checks.called_with = function(s, neg, ...)
    local ok, expected = recorded(s.calls, neg, ...)
    if ok then
      return true
    end
    return false, expected_the_spy(neg, "to be called with " .. show_args(expected) .. ", " .. last_call(s)
      .. " (" .. times(#s.calls) .. " in all)")
  end
  checks.returned_with = function(s, neg, ...)
    local ok, expected = recorded(s.returnvals, neg, ...)
    if ok then
      return true
    end
    local last = s.returnvals[#s.returnvals]
    return false, expected_the_spy(neg, "to return " .. show_args(expected) .. ", "
      .. (last and ("last returned " .. show_args(last.vals)) or "it never returned"))
  end

  local NEG_WORDS = { ["not"] = true, no = true, was_not = true, is_not = true, has_no = true,
    has_not = true, does_not = true, are_not = true }
  local POS_WORDS = { was = true, is = true, has = true, does = true, are = true, been = true, be = true }

  local function chain(s, neg, what)
    return setmetatable({}, {
      __index = function(_, k)
        if NEG_WORDS[k] then
          return chain(s, not neg, what)
        elseif POS_WORDS[k] then
          return chain(s, neg, what)
        end
        local name, n = k, neg
        -- was_called / was_not_called_with / ...
        local _, e = sfind(name, "^was_not_")
        if e then
          name, n = name:sub(e + 1), not neg
        else
          local _, e2 = sfind(name, "^was_")
          if e2 then
            name = name:sub(e2 + 1)
          end
        end
        local check = checks[name]
        if not check then
          error("unknown assertion '" .. tostring(k) .. "' (assert." .. what .. "(s)." .. tostring(k) .. ")", 2)
        end
        return function(...)
          local ok, text = check(s, n, ...)
          if not ok then
            record_failure(text)
            error(text, LEVEL)
          end
        end
      end,
    })
  end

  local function spy_assert(what)
    return function(s)
      if not is_spy(s) then
        local text = "assert." .. what .. ": a spy or stub expected, got " .. type(s)
        record_failure(text)
        error(text, LEVEL)
      end
      return chain(s, false, what)
    end
  end
  rawset(assert_tbl, "spy", spy_assert("spy"))
  rawset(assert_tbl, "stub", spy_assert("stub"))

  return D
end
