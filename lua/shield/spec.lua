-- shield.spec: a small busted/luassert-compatible spec runner for gopher-lua
-- (Lua 5.1 dialect).
--
--   local spec = require("shield.spec")
--   spec.install(_G)            -- describe/it/pending/hooks/assert into _G
--   -- ... load a spec file: describe()/it() calls only REGISTER tests ...
--   local passed, failed, skipped = spec.run(print)
--
-- Module API:
--   M.install(env)   defines describe/context, it, pending, before_each,
--                    after_each, setup/teardown (+ lazy_/strict_ aliases) and
--                    assert in env (default _G); returns env
--   M.run(write [, opts])  runs and reports the registered tests, resets the
--                    registry, returns passed, failed, skipped. opts (all
--                    optional): call(fn, name) runs user code instead of the
--                    global pcall and returns like pcall (the host runs each
--                    test as a task with a timeout); report(kind, name, text)
--                    is told each result ("ok", "fail", "pending") as it
--                    happens, with the failure message (and traceback) or
--                    the pending reason; summary = false leaves out the
--                    summary line
--   M.reset()        drops every registered test
--   M.assert         the luassert-style assert table (also callable)
--   M.serialize(v)   the deterministic value printer used in messages
--   M.same(a, b)     the deep comparison behind assert.same
--
-- Output of spec.run(write), one write(line) call per line:
--   ok - <describe path> <it name>
--   FAIL - <describe path> <it name>
--       <indented error message and, when the error value carries one, traceback>
--   PENDING - <describe path> <it name>
--   <N> passed, <N> failed[, <N> skipped]
--
-- Yield safety: the host runs spec.run inside a coroutine, and test bodies may
-- yield (block). User code (tests, hooks, functions given to has_error/...) is
-- therefore only ever called through plain Lua calls and the *global* pcall,
-- looked up at the moment of the call (the host swaps in a yield-safe pcall;
-- never cache it in a local). User code is never called from inside an
-- iterator function, a metamethod, a table.sort comparator or a gsub callback.

local M = {}

local type, tostring, tonumber, select, error = type, tostring, tonumber, select, error
local rawget, rawequal, next = rawget, rawequal, next
local setmetatable, getmetatable = setmetatable, getmetatable
local pairs, ipairs = pairs, ipairs
local sfind, sformat, ssub, sgsub = string.find, string.format, string.sub, string.gsub
local tsort, tconcat = table.sort, table.concat
local floor, abs, huge = math.floor, math.abs, math.huge

-- NOTE: `pcall` is deliberately NOT captured here. Every call site below uses
-- the global name, which resolves to the current global at call time.
--
-- NOTE: never write `for k in next, t do` -- gopher-lua v1.1.2 does not nil the
-- omitted control value, so the loop may start from a stale key and skip
-- entries (yuin/gopher-lua#514). Use pairs() or an explicit next() loop.

---------------------------------------------------------------------------
-- error levels
---------------------------------------------------------------------------

-- gopher-lua v1.1.2 resolves error(msg, level) one frame lower than
-- reference Lua (error(msg, 2) reports the same position as error(msg, 1)).
-- Probe the behaviour once so failure positions point at the caller of an
-- assertion (the test line) on both gopher-lua and reference Lua.
local LEVEL_SHIFT = 0
do
  local function probe_raise(level)
    error("probe", level)
  end
  local function probe_call(level)
    probe_raise(level)
    return level -- not a tail call: keeps probe_call's frame on the stack
  end
  local _, m1 = pcall(probe_call, 1)
  local _, m2 = pcall(probe_call, 2)
  if m1 == m2 then
    LEVEL_SHIFT = 1
  end
end
-- level for error() raised directly inside a function so that the position
-- reported is the line that called that function
local CALLER_LEVEL = 2 + LEVEL_SHIFT

---------------------------------------------------------------------------
-- serializer (deterministic: sorted keys, strings quoted with %q)
---------------------------------------------------------------------------

local KEYWORDS = {}
for _, w in ipairs({ "and", "break", "do", "else", "elseif", "end", "false",
  "for", "function", "goto", "if", "in", "local", "nil", "not", "or",
  "repeat", "return", "then", "true", "until", "while" }) do
  KEYWORDS[w] = true
end

local MAX_DEPTH = 12

local function is_identifier(s)
  return type(s) == "string" and sfind(s, "^[%a_][%w_]*$") ~= nil and not KEYWORDS[s]
end

local function format_number(n)
  if n ~= n then
    return "nan"
  elseif n == huge then
    return "inf"
  elseif n == -huge then
    return "-inf"
  end
  return tostring(n)
end

local serialize -- forward

local KEY_RANK = { number = 1, string = 2, boolean = 3 }

-- Returns every key of t (raw) in a deterministic order: numbers ascending,
-- then strings, then booleans, then everything else ordered by its serialized
-- form. Labels are computed before sorting, so the comparator is pure.
local function sorted_keys(t)
  local entries = {}
  local k = next(t)
  while k ~= nil do
    local kt = type(k)
    local e = { key = k, rank = KEY_RANK[kt] or 4 }
    if e.rank == 4 then
      e.label = kt .. ":" .. serialize(k)
    end
    entries[#entries + 1] = e
    k = next(t, k)
  end
  tsort(entries, function(a, b)
    if a.rank ~= b.rank then
      return a.rank < b.rank
    end
    if a.rank == 1 or a.rank == 2 then
      return a.key < b.key
    elseif a.rank == 3 then
      return (not a.key) and b.key
    end
    return a.label < b.label
  end)
  local keys = {}
  for i = 1, #entries do
    keys[i] = entries[i].key
  end
  return keys
end

local function serialize_table(t, seen, depth)
  if seen[t] then
    return "<cycle>"
  end
  if depth >= MAX_DEPTH then
    return "{...}"
  end
  seen[t] = true
  local parts = {}
  local n = 0
  while rawget(t, n + 1) ~= nil do
    n = n + 1
    parts[n] = serialize(rawget(t, n), seen, depth + 1)
  end
  local keys = sorted_keys(t)
  for i = 1, #keys do
    local key = keys[i]
    if not (type(key) == "number" and key >= 1 and key <= n and floor(key) == key) then
      local v = serialize(rawget(t, key), seen, depth + 1)
      if is_identifier(key) then
        parts[#parts + 1] = key .. " = " .. v
      else
        parts[#parts + 1] = "[" .. serialize(key, seen, depth + 1) .. "] = " .. v
      end
    end
  end
  seen[t] = nil
  if #parts == 0 then
    return "{}"
  end
  return "{" .. tconcat(parts, ", ") .. "}"
end

serialize = function(v, seen, depth)
  local t = type(v)
  if t == "string" then
    return sformat("%q", v)
  elseif t == "number" then
    return format_number(v)
  elseif t == "table" then
    return serialize_table(v, seen or {}, depth or 0)
  end
  return tostring(v)
end

M.serialize = function(v)
  return serialize(v)
end

-- "expected: 3" / "expected (table): {a = 1}"; prefix goes before the value.
local function show(label, v, prefix)
  local t = type(v)
  local s = (prefix or "") .. serialize(v)
  if t == "table" or t == "userdata" or t == "thread" then
    return label .. " (" .. t .. "): " .. s
  end
  return label .. ": " .. s
end

-- "got (number): 3" -- always annotated with the type
local function show_typed(label, v)
  return label .. " (" .. type(v) .. "): " .. serialize(v)
end

---------------------------------------------------------------------------
-- deep comparison
---------------------------------------------------------------------------

local function key_path(k)
  if is_identifier(k) then
    return "." .. k
  end
  return "[" .. serialize(k) .. "]"
end

-- returns true, or false plus the path of the first difference (in sorted
-- key order, so the reported path is deterministic)
local function deep_same(a, b, seen, path)
  if rawequal(a, b) then
    return true
  end
  local ta, tb = type(a), type(b)
  if ta ~= tb then
    return false, path
  end
  if ta == "number" then
    if a ~= a and b ~= b then
      return true -- nan is "the same" as nan
    end
    return false, path
  end
  if ta ~= "table" then
    if a == b then -- e.g. userdata with __eq
      return true
    end
    return false, path
  end
  local sa = seen[a]
  if sa == nil then
    sa = {}
    seen[a] = sa
  end
  if sa[b] then
    return true -- already being compared further up (cycle)
  end
  sa[b] = true
  local keys = sorted_keys(a)
  for i = 1, #keys do
    local k = keys[i]
    local ok, p = deep_same(rawget(a, k), rawget(b, k), seen, path .. key_path(k))
    if not ok then
      return false, p
    end
  end
  keys = sorted_keys(b)
  for i = 1, #keys do
    local k = keys[i]
    if rawget(a, k) == nil then
      return false, path .. key_path(k)
    end
  end
  return true
end

local function same(a, b)
  return deep_same(a, b, {}, "")
end

M.same = function(a, b)
  return (same(a, b))
end

---------------------------------------------------------------------------
-- error values
---------------------------------------------------------------------------

-- marker raised by pending() inside a running test
local PENDING_MT = {
  __tostring = function(p)
    return "pending: " .. tostring(p.reason)
  end,
}

local function is_pending(err)
  return type(err) == "table" and getmetatable(err) == PENDING_MT
end

-- message (string) and optional traceback carried by an error value
local function error_parts(err)
  local t = type(err)
  if t == "string" then
    return err
  elseif t == "table" then
    local tb = rawget(err, "traceback")
    if type(tb) ~= "string" then
      tb = nil
    end
    local msg = rawget(err, "message")
    if msg ~= nil then
      if type(msg) ~= "string" then
        msg = serialize(msg)
      end
      return msg, tb
    end
    local mt = getmetatable(err)
    if type(mt) == "table" and rawget(mt, "__tostring") ~= nil then
      return tostring(err), tb
    end
    return serialize(err), tb
  end
  return serialize(err)
end

local function error_message(err)
  return (error_parts(err))
end

-- luassert-style comparison of an error value with an expected one: strings
-- are equal either verbatim or after stripping a leading "file:line: ".
local function error_equals(err, expected)
  local msg = err
  if type(err) == "table" and type(expected) ~= "table" then
    msg = error_message(err)
  end
  if type(expected) == "number" and type(msg) == "string" then
    expected = tostring(expected)
  end
  if type(msg) == "string" and type(expected) == "string" then
    if msg == expected then
      return true
    end
    local stripped = sgsub(msg, "^[^\n]-:%d+: ", "", 1)
    return stripped == expected
  end
  return (same(msg, expected))
end

local function is_callable(f)
  if type(f) == "function" then
    return true
  end
  local mt = getmetatable(f)
  return type(mt) == "table" and rawget(mt, "__call") ~= nil
end

---------------------------------------------------------------------------
-- assertions
---------------------------------------------------------------------------
-- Each definition: nargs = number of positional arguments (the optional
-- failure message follows them); check(neg, ...) returns passed (already
-- taking the negation into account), failure text, and optionally a message
-- found elsewhere in the arguments.

local defs = {}

defs.equal = {
  nargs = 2,
  check = function(neg, expected, actual)
    local eq = rawequal(expected, actual)
    if eq ~= neg then
      return true
    end
    if neg then
      return false, show("expected", expected, "not ") .. ", " .. show("got", actual)
    end
    local text = show("expected", expected) .. ", " .. show("got", actual)
    if type(expected) == "table" and type(actual) == "table" and same(expected, actual) then
      text = text .. " (same contents but different tables; use assert.same for a deep compare)"
    end
    return false, text
  end,
}
defs.equals = defs.equal

defs.same = {
  nargs = 2,
  check = function(neg, expected, actual)
    local ok, path = same(expected, actual)
    if ok ~= neg then
      return true
    end
    if neg then
      return false, show("expected", expected, "not same as ") .. ", " .. show("got", actual)
    end
    local text = show("expected", expected) .. ", " .. show("got", actual)
    if path and path ~= "" then
      text = text .. " (first difference at " .. path .. ")"
    end
    return false, text
  end,
}

defs.truthy = {
  nargs = 1,
  check = function(neg, v)
    local ok = v ~= nil and v ~= false
    if ok ~= neg then
      return true
    end
    return false, "expected: " .. (neg and "falsy" or "truthy") .. " value, " .. show("got", v)
  end,
}

defs.falsy = {
  nargs = 1,
  check = function(neg, v)
    local ok = v == nil or v == false
    if ok ~= neg then
      return true
    end
    return false, "expected: " .. (neg and "truthy" or "falsy") .. " value, " .. show("got", v)
  end,
}

local function exact(value)
  return {
    nargs = 1,
    check = function(neg, v)
      if rawequal(v, value) ~= neg then
        return true
      end
      return false, "expected: " .. (neg and "not " or "") .. tostring(value) .. ", " .. show("got", v)
    end,
  }
end
defs["nil"] = exact(nil)
defs["true"] = exact(true)
defs["false"] = exact(false)
defs.Nil, defs.True, defs.False = defs["nil"], defs["true"], defs["false"]

for _, tname in ipairs({ "string", "number", "table", "function", "boolean", "userdata", "thread" }) do
  defs[tname] = {
    nargs = 1,
    check = function(neg, v)
      if (type(v) == tname) ~= neg then
        return true
      end
      return false, "expected: value " .. (neg and "not " or "") .. "of type " .. tname
        .. ", " .. show_typed("got", v)
    end,
  }
end

defs.near = {
  nargs = 3,
  check = function(neg, expected, actual, tolerance)
    if type(expected) ~= "number" or type(actual) ~= "number" or type(tolerance) ~= "number" then
      return false, "near: expected, actual and tolerance must be numbers, "
        .. show_typed("got expected", expected) .. ", " .. show_typed("actual", actual)
        .. ", " .. show_typed("tolerance", tolerance)
    end
    local ok = abs(expected - actual) <= tolerance
    if ok ~= neg then
      return true
    end
    return false, "expected: " .. (neg and "not " or "") .. format_number(expected) .. " +/- "
      .. format_number(tolerance) .. ", got: " .. format_number(actual)
  end,
}

-- has_error(fn [, expected_err]); negated: has_no_error(fn [, err])
defs.error = {
  nargs = 2,
  check = function(neg, fn, expected)
    if not is_callable(fn) then
      return false, "expected: a function to call, " .. show_typed("got", fn)
    end
    local ok, err = pcall(fn) -- global pcall, looked up now
    local has_expected = expected ~= nil
    if ok then
      if neg then
        return true
      end
      if has_expected then
        return false, show("expected error", expected) .. ", got: no error"
      end
      return false, "expected: an error, got: no error"
    end
    local matched = true
    if has_expected then
      matched = error_equals(err, expected)
    end
    if matched ~= neg then
      return true
    end
    if neg then
      if has_expected then
        return false, show("expected", expected, "no error equal to ") .. ", " .. show("got error", err)
      end
      return false, "expected: no error, " .. show("got error", err)
    end
    return false, show("expected error", expected) .. ", " .. show("got error", err)
  end,
}
defs.errors = defs.error

-- error_matches(fn, pattern [, init [, plain]])
defs.error_matches = {
  nargs = 4,
  check = function(neg, fn, pattern, init, plain, msg)
    local override
    if type(init) == "string" and tonumber(init) == nil then
      override, init, plain = init, nil, nil -- error_matches(fn, pattern, message)
    elseif type(plain) == "string" then
      override, plain = plain, nil -- error_matches(fn, pattern, init, message)
    else
      override = msg
    end
    if not is_callable(fn) then
      return false, "expected: a function to call, " .. show_typed("got", fn), override
    end
    if type(pattern) ~= "string" then
      return false, "error_matches: pattern must be a string, " .. show_typed("got", pattern), override
    end
    local ok, err = pcall(fn) -- global pcall, looked up now
    if ok then
      if neg then
        return true
      end
      return false, "expected: an error matching " .. serialize(pattern) .. ", got: no error", override
    end
    local text = error_message(err)
    local matched = sfind(text, pattern, init, plain) ~= nil
    if matched ~= neg then
      return true
    end
    return false, "expected: " .. (neg and "no error" or "an error") .. " matching "
      .. serialize(pattern) .. ", got error: " .. serialize(text), override
  end,
}
defs.error_match = defs.error_matches
defs.matches_error = defs.error_matches

-- matches(pattern, str [, init [, plain]])
defs.matches = {
  nargs = 4,
  check = function(neg, pattern, s, init, plain, msg)
    local override
    if type(init) == "string" and tonumber(init) == nil then
      override, init, plain = init, nil, nil
    elseif type(plain) == "string" then
      override, plain = plain, nil
    else
      override = msg
    end
    if type(pattern) ~= "string" then
      return false, "matches: pattern must be a string, " .. show_typed("got", pattern), override
    end
    if type(s) == "number" then
      s = tostring(s)
    end
    if type(s) ~= "string" then
      return false, "expected: string " .. (neg and "not " or "") .. "matching " .. serialize(pattern)
        .. ", " .. show_typed("got", s), override
    end
    local matched = sfind(s, pattern, init, plain) ~= nil
    if matched ~= neg then
      return true
    end
    return false, "expected: string " .. (neg and "not " or "") .. "matching " .. serialize(pattern)
      .. ", got: " .. serialize(s), override
  end,
}
defs.match = defs.matches

local function build(def, neg)
  local nargs, check = def.nargs, def.check
  return function(...)
    local ok, text, msg = check(neg, ...)
    if not ok then
      if msg == nil and select("#", ...) > nargs then
        msg = (select(nargs + 1, ...))
      end
      if msg ~= nil then
        text = tostring(msg) .. ": " .. text
      end
      error(text, CALLER_LEVEL) -- position: the line that called the assertion
    end
  end
end

local assert_tbl = {}

local POS_PREFIXES = { "", "is_", "are_", "has_", "does_", "was_" }
local NEG_PREFIXES = { "not_", "is_not_", "are_not_", "has_no_", "no_", "does_not_", "was_not_" }
local POS_SPACES = { "is", "are", "has", "does", "was" }
local NEG_SPACES = { "is_not", "are_not", "has_no", "no", "does_not", "was_not" }

do
  local names = {}
  for name in pairs(defs) do
    names[#names + 1] = name
  end
  tsort(names)
  local pos_space, neg_space = {}, {}
  for i = 1, #names do
    local name = names[i]
    local def = defs[name]
    local pos = build(def, false)
    local neg = build(def, true)
    pos_space[name] = pos
    neg_space[name] = neg
    for j = 1, #POS_PREFIXES do
      assert_tbl[POS_PREFIXES[j] .. name] = pos
    end
    for j = 1, #NEG_PREFIXES do
      assert_tbl[NEG_PREFIXES[j] .. name] = neg
    end
  end
  for i = 1, #POS_SPACES do
    local t = {}
    for k, v in pairs(pos_space) do
      t[k] = v
    end
    assert_tbl[POS_SPACES[i]] = t
  end
  for i = 1, #NEG_SPACES do
    local t = {}
    for k, v in pairs(neg_space) do
      t[k] = v
    end
    assert_tbl[NEG_SPACES[i]] = t
  end
end

-- An unknown assertion name is an error that names it (assert.are.banana),
-- not "attempt to call a nil value".
local function unknown(space)
  return {
    __index = function(_, k)
      error("unknown assertion '" .. tostring(k) .. "' (assert" .. space .. "." .. tostring(k) .. ")", CALLER_LEVEL)
    end,
  }
end
for i = 1, #POS_SPACES do
  setmetatable(assert_tbl[POS_SPACES[i]], unknown("." .. POS_SPACES[i]))
end
for i = 1, #NEG_SPACES do
  setmetatable(assert_tbl[NEG_SPACES[i]], unknown("." .. NEG_SPACES[i]))
end

-- assert(v [, msg, ...]): plain truthiness assertion with Lua's semantics
-- (returns all its arguments on success). Calls no user code.
setmetatable(assert_tbl, {
  __index = unknown("").__index,
  __call = function(_, ...)
    local v = ...
    if not v then
      local msg
      if select("#", ...) >= 2 then
        msg = (select(2, ...))
      end
      if msg == nil then
        msg = "assertion failed!"
      end
      if type(msg) == "number" then
        msg = tostring(msg)
      end
      error(msg, CALLER_LEVEL)
    end
    return ...
  end,
})

M.assert = assert_tbl

---------------------------------------------------------------------------
-- registry
---------------------------------------------------------------------------

local function new_block(name, parent)
  return {
    name = name,
    parent = parent,
    children = {}, -- { kind = "describe"|"it"|"pending"|"error", ... }
    before_each = {},
    after_each = {},
    setup = {},
    teardown = {},
  }
end

local state = {}

function M.reset()
  state.root = new_block(nil, nil)
  state.current = state.root
  state.in_user_code = false
end
M.reset()

local function check_registration(what, fn, level)
  if state.in_user_code then
    error(what .. "() cannot be called while a test is running", level)
  end
  if not is_callable(fn) then
    error(what .. "(): function expected, got " .. type(fn), level)
  end
end

local function add_child(entry)
  local children = state.current.children
  children[#children + 1] = entry
end

local function describe(name, fn)
  check_registration("describe", fn, CALLER_LEVEL + 1)
  local parent = state.current
  local block = new_block(tostring(name), parent)
  add_child({ kind = "describe", block = block })
  state.current = block
  local ok, err = pcall(fn) -- global pcall, looked up now
  state.current = parent
  if not ok then
    -- reported as a failure of the describe block when the file is run
    block.children[#block.children + 1] = { kind = "error", err = err }
  end
end

local function pending(name, fn)
  if state.in_user_code then
    -- pending() inside a running test: abort it and report it as pending
    error(setmetatable({ reason = name }, PENDING_MT), 0)
  end
  add_child({ kind = "pending", name = tostring(name) })
end

local function it(name, fn)
  if fn == nil and not state.in_user_code then
    add_child({ kind = "pending", name = tostring(name) })
    return
  end
  check_registration("it", fn, CALLER_LEVEL + 1)
  add_child({ kind = "it", name = tostring(name), fn = fn })
end

local function hook(kind)
  return function(fn)
    check_registration(kind, fn, CALLER_LEVEL + 1)
    local list = state.current[kind]
    list[#list + 1] = fn
  end
end

local before_each, after_each = hook("before_each"), hook("after_each")
local setup, teardown = hook("setup"), hook("teardown")

M.describe, M.it, M.pending = describe, it, pending
M.before_each, M.after_each, M.setup, M.teardown = before_each, after_each, setup, teardown

function M.install(env)
  if env == nil then
    env = _G
  end
  env.describe = describe
  env.context = describe
  env.it = it
  env.pending = pending
  env.before_each = before_each
  env.after_each = after_each
  env.setup = setup
  env.teardown = teardown
  env.lazy_setup = setup
  env.lazy_teardown = teardown
  env.strict_setup = setup
  env.strict_teardown = teardown
  env.assert = assert_tbl
  return env
end

---------------------------------------------------------------------------
-- runner
---------------------------------------------------------------------------

local INDENT = "    "

-- Calls user code through the global pcall (looked up at call time, the host
-- may have replaced it with a yield-safe version). Plain call, no iterator or
-- metamethod in between, so test bodies may yield.
local function call_user(fn, name)
  state.in_user_code = true
  local ok, err
  if state.call then
    ok, err = state.call(fn, name)
  else
    ok, err = pcall(fn)
  end
  state.in_user_code = false
  return ok, err
end

local function join(names, last)
  local parts = {}
  for i = 1, #names do
    parts[#parts + 1] = names[i]
  end
  if last ~= nil then
    parts[#parts + 1] = last
  end
  return tconcat(parts, " ")
end

local function write_indented(ctx, text)
  local pos, len = 1, #text
  while pos <= len do
    local nl = sfind(text, "\n", pos, true)
    if not nl then
      ctx.write(INDENT .. ssub(text, pos))
      return
    end
    ctx.write(INDENT .. ssub(text, pos, nl - 1))
    pos = nl + 1
  end
  if len == 0 then
    ctx.write(INDENT)
  end
end

local function told(ctx, kind, name, text)
  if ctx.report then
    ctx.report(kind, name, text)
  end
end

local function report_ok(ctx, name)
  ctx.passed = ctx.passed + 1
  ctx.write("ok - " .. name)
  told(ctx, "ok", name)
end

local function report_pending(ctx, name, reason)
  ctx.skipped = ctx.skipped + 1
  ctx.write("PENDING - " .. name)
  if reason ~= nil and reason ~= "" then
    write_indented(ctx, tostring(reason))
  end
  told(ctx, "pending", name, reason ~= nil and tostring(reason) or nil)
end

-- errs: list of { phase, err }; phase is nil for the test body itself
local function report_fail(ctx, name, errs)
  ctx.failed = ctx.failed + 1
  local parts = {}
  for i = 1, #errs do
    local phase, err = errs[i][1], errs[i][2]
    local msg, tb = error_parts(err)
    if phase then
      msg = phase .. ": " .. msg
    end
    parts[#parts + 1] = msg
    if tb then
      parts[#parts + 1] = tb
    end
  end
  local text = tconcat(parts, "\n")
  told(ctx, "fail", name, text)
  ctx.write("FAIL - " .. name)
  for i = 1, #parts do
    write_indented(ctx, parts[i])
  end
end

local function count_runnable(block)
  local n = 0
  local children = block.children
  for i = 1, #children do
    local c = children[i]
    if c.kind == "it" then
      n = n + 1
    elseif c.kind == "describe" then
      n = n + count_runnable(c.block)
    end
  end
  return n
end

-- setup of an enclosing block failed: every test below is failed unrun
local function fail_block(ctx, block, names, phase, err)
  local children = block.children
  for i = 1, #children do
    local c = children[i]
    if c.kind == "it" then
      report_fail(ctx, join(names, c.name), { { phase, err } })
    elseif c.kind == "pending" then
      report_pending(ctx, join(names, c.name))
    elseif c.kind == "error" then
      report_fail(ctx, join(names), { { "describe", c.err } })
    elseif c.kind == "describe" then
      local sub = {}
      for j = 1, #names do
        sub[j] = names[j]
      end
      sub[#sub + 1] = c.block.name
      fail_block(ctx, c.block, sub, phase, err)
    end
  end
end

local function run_test(ctx, test, names, befores, afters)
  local name = join(names, test.name)
  local errs = {}
  local pending_reason, is_pend = nil, false
  for i = 1, #befores do
    local ok, err = call_user(befores[i], name .. " (before_each)")
    if not ok then
      if is_pending(err) then
        is_pend, pending_reason = true, err.reason
      else
        errs[#errs + 1] = { "before_each", err }
      end
      break
    end
  end
  if #errs == 0 and not is_pend then
    local ok, err = call_user(test.fn, name)
    if not ok then
      if is_pending(err) then
        is_pend, pending_reason = true, err.reason
      else
        errs[#errs + 1] = { nil, err }
      end
    end
  end
  -- after_each always runs, even when before_each or the body failed
  for i = 1, #afters do
    local ok, err = call_user(afters[i], name .. " (after_each)")
    if not ok then
      errs[#errs + 1] = { "after_each", err }
    end
  end
  if #errs > 0 then
    report_fail(ctx, name, errs)
  elseif is_pend then
    report_pending(ctx, name, pending_reason)
  else
    report_ok(ctx, name)
  end
end

local function run_block(ctx, block, names, befores, afters)
  if block.name ~= nil then
    local sub = {}
    for i = 1, #names do
      sub[i] = names[i]
    end
    sub[#sub + 1] = block.name
    names = sub
  end
  -- before_each: outer first; after_each: inner first (registration order
  -- within one block)
  local my_befores, my_afters = {}, {}
  for i = 1, #befores do
    my_befores[#my_befores + 1] = befores[i]
  end
  for i = 1, #block.before_each do
    my_befores[#my_befores + 1] = block.before_each[i]
  end
  for i = 1, #block.after_each do
    my_afters[#my_afters + 1] = block.after_each[i]
  end
  for i = 1, #afters do
    my_afters[#my_afters + 1] = afters[i]
  end

  -- setup/teardown only run for blocks that contain tests to run
  local runnable = count_runnable(block) > 0
  local setup_err, setup_failed = nil, false
  if runnable then
    for i = 1, #block.setup do
      local ok, err = call_user(block.setup[i], join(names, "(setup)"))
      if not ok then
        setup_err, setup_failed = err, true
        break
      end
    end
  end

  if setup_failed then
    fail_block(ctx, block, names, "setup", setup_err)
  else
    local children = block.children
    for i = 1, #children do
      local c = children[i]
      if c.kind == "describe" then
        run_block(ctx, c.block, names, my_befores, my_afters)
      elseif c.kind == "it" then
        run_test(ctx, c, names, my_befores, my_afters)
      elseif c.kind == "pending" then
        report_pending(ctx, join(names, c.name))
      elseif c.kind == "error" then
        report_fail(ctx, join(names), { { "describe", c.err } })
      end
    end
  end

  if runnable then
    -- teardown runs even after a failed setup, to undo a partial setup
    for i = 1, #block.teardown do
      local ok, err = call_user(block.teardown[i], join(names, "(teardown)"))
      if not ok then
        report_fail(ctx, join(names, "(teardown)"), { { "teardown", err } })
      end
    end
  end
end

-- Runs every registered test, writes the report through write(line) and
-- returns passed, failed, skipped. The registry is reset first, so tests
-- registered from here on belong to the next run.
function M.run(write, opts)
  if write == nil then
    write = print
  end
  opts = opts or {}
  local root = state.root
  M.reset()
  state.call = opts.call
  local ctx = { write = write, report = opts.report, passed = 0, failed = 0, skipped = 0 }
  run_block(ctx, root, {}, {}, {})
  state.call = nil
  if opts.summary ~= false then
    local summary = ctx.passed .. " passed, " .. ctx.failed .. " failed"
    if ctx.skipped > 0 then
      summary = summary .. ", " .. ctx.skipped .. " skipped"
    end
    write(summary)
  end
  return ctx.passed, ctx.failed, ctx.skipped
end

return M
