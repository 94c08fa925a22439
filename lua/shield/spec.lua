-- shield.spec: a small busted/luassert-compatible spec runner for gopher-lua
-- (Lua 5.1 dialect).
--
--   local spec = require("shield.spec")
--   spec.install(_G)            -- describe/it/pending/hooks/assert into _G
--   -- ... load a spec file: describe()/it() calls only REGISTER tests ...
--   local passed, failed, skipped = spec.run(print)
--
-- Module API:
--   M.install(env)   defines describe/context, insulate, expose, it, pending,
--                    finally, before_each, after_each, setup/teardown (+
--                    lazy_/strict_ aliases), assert, spy, stub, mock and
--                    match in env (default _G); returns env
--   M.run(write [, opts])  runs and reports the registered tests, resets the
--                    registry, returns passed, failed, skipped, errors
--                    (failed: an assertion did not hold; errors: anything
--                    else). opts (all optional): call(fn, name) runs user
--                    code instead of the global pcall and returns like pcall
--                    (plus the traceback of an error value that carries
--                    none; the host runs each test as a task with a
--                    timeout); report(kind, name, text, pos) is told each
--                    result ("ok", "fail", "error", "pending", "list") as it
--                    happens, with the message (and traceback) or the
--                    pending reason and the it()'s "file:line"; summary =
--                    false leaves out the summary line; filter, filter_out,
--                    tags, exclude_tags (lists) select tests as busted's
--                    flags do; rand(n) -> 1..n shuffles each block; list =
--                    true reports the selected tests as "list" and runs
--                    nothing
--   M.reset()        drops every registered test
--   M.assert         the luassert-style assert table (also callable)
--   M.serialize(v)   the deterministic value printer used in messages
--   M.same(a, b)     the deep comparison behind assert.same
--   M.record_failure(text)  notes an assertion failure's text (a test that
--                    raises it then counts as failed, not errored)
--
-- Output of spec.run(write), one write(line) call per line:
--   ok - <describe path> <it name>
--   FAIL - <describe path> <it name>      (ERROR - ... for other errors)
--       <indented message, starting with file:line, and the traceback>
--   PENDING - <describe path> <it name>
--   <N> passed, <N> failed[, <N> errors][, <N> skipped]
--
-- Yield safety: the host runs spec.run inside a coroutine, and test bodies may
-- yield (block). User code (tests, hooks, functions given to has_error/...) is
-- therefore only ever called through plain Lua calls and the *global* pcall,
-- looked up at the moment of the call (the host swaps in a yield-safe pcall;
-- never cache it in a local). User code is never called from inside an
-- iterator function, a metamethod, a table.sort comparator or a gsub callback,
-- with one exception: a spy's __call calls the spied function. gopher-lua
-- runs a __call metamethod as a plain Lua call, so that function may block
-- too (cmd/shield/testdata/specs/doubles_spec.lua, "blocking").

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

---------------------------------------------------------------------------
-- failures vs errors
---------------------------------------------------------------------------
-- busted counts an assertion that does not hold as a failure and any other
-- error as an error. Assertions raise plain strings (so pcall and has_error
-- see what luassert users expect) and note the text here first; a test's
-- error is a failure when its message, without the "file:line: " prefix,
-- is one of the noted texts. Reset for each test.
local failure_texts = {}

local function record_failure(text)
  if type(text) == "string" then
    failure_texts[text] = true
  end
end

local function reset_failures()
  failure_texts = {}
end

local function is_failure(err)
  local msg = err
  if type(err) == "table" then
    msg = rawget(err, "message")
  end
  if type(msg) ~= "string" then
    return false
  end
  if failure_texts[msg] then
    return true
  end
  return failure_texts[(sgsub(msg, "^[^\n]-:%d+: ", "", 1))] == true
end

M.record_failure = record_failure

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
      record_failure(text)
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
      record_failure(msg)
      error(msg, CALLER_LEVEL)
    end
    return ...
  end,
})

M.assert = assert_tbl

---------------------------------------------------------------------------
-- test doubles (spy, stub, mock, match: lua/shield/spec_doubles.lua,
-- prepended to this file by the embedding as make_doubles)
---------------------------------------------------------------------------

local doubles
if make_doubles then
  doubles = make_doubles({
    assert = assert_tbl,
    same = deep_same,
    serialize = serialize,
    record_failure = record_failure,
    level = CALLER_LEVEL,
  })
end

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

-- "file:line" of the code that called a registration function (it,
-- describe, pending), for --list and the JSON output.
local function where(level)
  local info = debug and debug.getinfo and debug.getinfo(level + 1, "Sl")
  if not info or type(info.source) ~= "string" or not info.currentline or info.currentline < 0 then
    return nil
  end
  local src = info.source
  if ssub(src, 1, 1) == "@" then
    src = ssub(src, 2)
  end
  return src .. ":" .. info.currentline
end

local function add_child(entry)
  local children = state.current.children
  children[#children + 1] = entry
end

-- insulate blocks restore _G and package.loaded when they end (busted's
-- insulate); a snapshot is a shallow copy of both.
local function snapshot()
  local g, l = {}, {}
  for k, v in pairs(_G) do
    g[k] = v
  end
  for k, v in pairs(package.loaded) do
    l[k] = v
  end
  return { g = g, l = l }
end

local function restore_table(t, saved)
  local extra = {}
  for k in pairs(t) do
    if saved[k] == nil then
      extra[#extra + 1] = k
    end
  end
  for i = 1, #extra do
    rawset(t, extra[i], nil)
  end
  for k, v in pairs(saved) do
    if rawget(t, k) ~= v then
      rawset(t, k, v)
    end
  end
end

local function restore(snap)
  restore_table(_G, snap.g)
  restore_table(package.loaded, snap.l)
end

local function block_fn(kind)
  return function(name, fn)
    check_registration(kind, fn, CALLER_LEVEL + 1)
    local parent = state.current
    local block = new_block(tostring(name), parent)
    block.insulate = kind == "insulate"
    add_child({ kind = "describe", block = block, pos = where(2) })
    state.current = block
    local snap = block.insulate and snapshot()
    local ok, err = pcall(fn) -- global pcall, looked up now
    if snap then
      restore(snap)
    end
    state.current = parent
    if not ok then
      -- reported as an error of the describe block when the file is run
      block.children[#block.children + 1] = { kind = "error", err = err }
    end
  end
end

local describe = block_fn("describe")
local insulate = block_fn("insulate")
-- expose: busted's way to let a block's globals outlive it. Blocks other
-- than insulate ones never undo globals here, so expose is describe (each
-- file still runs in a Lua state of its own).
local expose = block_fn("expose")

local function pending(name, fn)
  if state.in_user_code then
    -- pending() inside a running test: abort it and report it as pending
    error(setmetatable({ reason = name }, PENDING_MT), 0)
  end
  add_child({ kind = "pending", name = tostring(name), pos = where(2) })
end

local function it(name, fn)
  if fn == nil and not state.in_user_code then
    add_child({ kind = "pending", name = tostring(name), pos = where(2) })
    return
  end
  check_registration("it", fn, CALLER_LEVEL + 1)
  add_child({ kind = "it", name = tostring(name), fn = fn, pos = where(2) })
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

-- finally(fn): inside a running test (or its before_each), fn runs once the
-- test body is over, before after_each, whether the body failed or not.
-- busted keeps only the last one given; every one given runs here, the last
-- given first.
local function finally(fn)
  if not state.in_user_code or not state.finally then
    error("finally() can only be called while a test is running", CALLER_LEVEL)
  end
  if not is_callable(fn) then
    error("finally(): function expected, got " .. type(fn), CALLER_LEVEL)
  end
  local list = state.finally
  list[#list + 1] = fn
end

M.describe, M.it, M.pending = describe, it, pending
M.insulate, M.expose, M.finally = insulate, expose, finally
M.before_each, M.after_each, M.setup, M.teardown = before_each, after_each, setup, teardown

function M.install(env)
  if env == nil then
    env = _G
  end
  env.describe = describe
  env.context = describe
  env.insulate = insulate
  env.expose = expose
  env.it = it
  env.pending = pending
  env.finally = finally
  env.before_each = before_each
  env.after_each = after_each
  env.setup = setup
  env.teardown = teardown
  env.lazy_setup = setup
  env.lazy_teardown = teardown
  env.strict_setup = setup
  env.strict_teardown = teardown
  env.assert = assert_tbl
  if doubles then
    env.spy = doubles.spy
    env.stub = doubles.stub
    env.mock = doubles.mock
    env.match = doubles.match
  end
  return env
end

---------------------------------------------------------------------------
-- runner
---------------------------------------------------------------------------

local INDENT = "    "

-- Calls user code through the global pcall (looked up at call time, the host
-- may have replaced it with a yield-safe version). Plain call, no iterator or
-- metamethod in between, so test bodies may yield. Returns ok, err and, when
-- the host gives one, the traceback of an error value that carries none.
local function call_user(fn, name)
  state.in_user_code = true
  local ok, err, tb
  if state.call then
    ok, err, tb = state.call(fn, name)
  else
    ok, err = pcall(fn)
  end
  state.in_user_code = false
  return ok, err, tb
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

local function told(ctx, kind, name, text, pos)
  if ctx.report then
    ctx.report(kind, name, text, pos)
  end
end

local function report_ok(ctx, name, pos)
  ctx.passed = ctx.passed + 1
  ctx.write("ok - " .. name)
  told(ctx, "ok", name, nil, pos)
end

local function report_pending(ctx, name, reason, pos)
  ctx.skipped = ctx.skipped + 1
  ctx.write("PENDING - " .. name)
  if reason ~= nil and reason ~= "" then
    write_indented(ctx, tostring(reason))
  end
  told(ctx, "pending", name, reason ~= nil and tostring(reason) or nil, pos)
end

-- The first "file:line" of a traceback that is the user's (not the
-- runtime's embedded code, not a Go function).
local function traceback_position(tb)
  if type(tb) ~= "string" then
    return nil
  end
  local pos = 1
  while pos <= #tb do
    local nl = sfind(tb, "\n", pos, true) or (#tb + 1)
    local line = ssub(tb, pos, nl - 1)
    local _, _, where_ = sfind(line, "^%s*([^%s<%[%(][^\n]-:%d+):")
    if where_ then
      return where_
    end
    pos = nl + 1
  end
  return nil
end

-- message and traceback of an error, the message always starting with a
-- position: one an error value lacks (error({code = 42}), error("x", 0))
-- is taken from its traceback.
local function describe_error(err, tb)
  local msg, own_tb = error_parts(err)
  tb = own_tb or tb
  if not sfind(msg, "^[^%s(][^%s(]-:%d+: ") then
    local pos = traceback_position(tb)
    if pos then
      msg = pos .. ": " .. msg
    end
  end
  return msg, tb
end

-- errs: list of { phase, err, traceback }; phase is nil for the test body.
-- A test whose every error is an assertion that did not hold failed; any
-- other error makes it an error (busted's failure / error).
local function report_fail(ctx, name, errs, pos)
  local kind = "fail"
  for i = 1, #errs do
    if not is_failure(errs[i][2]) then
      kind = "error"
    end
  end
  if kind == "fail" then
    ctx.failed = ctx.failed + 1
  else
    ctx.errors = ctx.errors + 1
  end
  local parts = {}
  for i = 1, #errs do
    local phase, err = errs[i][1], errs[i][2]
    local msg, tb = describe_error(err, errs[i][3])
    if phase then
      msg = phase .. ": " .. msg
    end
    parts[#parts + 1] = msg
    if tb then
      parts[#parts + 1] = tb
    end
  end
  local text = tconcat(parts, "\n")
  told(ctx, kind, name, text, pos)
  ctx.write((kind == "fail" and "FAIL - " or "ERROR - ") .. name)
  for i = 1, #parts do
    write_indented(ctx, parts[i])
  end
end

-- busted's tags: "#word" in a test's full name (its describes' names
-- included). A tag matches "#tag" followed by anything but a word
-- character, so --tags=slow does not pick "#slower".
local function has_tag(name, tag)
  local init = 1
  while true do
    local s, e = sfind(name, "#" .. tag, init, true)
    if not s then
      return false
    end
    local nextc = ssub(name, e + 1, e + 1)
    if nextc == "" or not sfind(nextc, "^[%w_%-]") then
      return true
    end
    init = e + 1
  end
end

local function any_match(list, name, fn)
  for i = 1, #list do
    if fn(name, list[i]) then
      return true
    end
  end
  return false
end

local function pattern_find(name, pattern)
  return sfind(name, pattern) ~= nil
end

-- busted's selection: --filter (any pattern matches the full name),
-- --filter-out (none does; wins over --filter), --tags (any tag present),
-- --exclude-tags (none present; wins over --tags).
local function selected(ctx, fullname)
  local sel = ctx.select
  if #sel.filter_out > 0 and any_match(sel.filter_out, fullname, pattern_find) then
    return false
  end
  if #sel.exclude_tags > 0 and any_match(sel.exclude_tags, fullname, has_tag) then
    return false
  end
  if #sel.filter > 0 and not any_match(sel.filter, fullname, pattern_find) then
    return false
  end
  if #sel.tags > 0 and not any_match(sel.tags, fullname, has_tag) then
    return false
  end
  return true
end

-- a describe block is skipped whole when its own full name is filtered out
-- or carries an excluded tag (busted applies those two to describe too)
local function block_excluded(ctx, fullname)
  local sel = ctx.select
  return (#sel.filter_out > 0 and any_match(sel.filter_out, fullname, pattern_find))
    or (#sel.exclude_tags > 0 and any_match(sel.exclude_tags, fullname, has_tag))
end

local function sub_names(names, name)
  local sub = {}
  for j = 1, #names do
    sub[j] = names[j]
  end
  sub[#sub + 1] = name
  return sub
end

-- the children a run visits: selected tests, blocks not excluded, in
-- registration order or shuffled (--shuffle)
local function visible(ctx, block, names)
  local out = {}
  local children = block.children
  for i = 1, #children do
    local c = children[i]
    if c.kind == "it" or c.kind == "pending" then
      if selected(ctx, join(names, c.name)) then
        out[#out + 1] = c
      end
    elseif c.kind == "describe" then
      if not block_excluded(ctx, join(names, c.block.name)) then
        out[#out + 1] = c
      end
    else
      out[#out + 1] = c
    end
  end
  if ctx.rand then
    for i = #out, 2, -1 do
      local j = ctx.rand(i)
      out[i], out[j] = out[j], out[i]
    end
  end
  return out
end

local function count_runnable(ctx, block, names)
  local n = 0
  local children = visible(ctx, block, names)
  for i = 1, #children do
    local c = children[i]
    if c.kind == "it" then
      n = n + 1
    elseif c.kind == "describe" then
      n = n + count_runnable(ctx, c.block, sub_names(names, c.block.name))
    end
  end
  return n
end

-- setup of an enclosing block failed: every test below is failed unrun
local function fail_block(ctx, block, names, phase, err, tb)
  local children = visible(ctx, block, names)
  for i = 1, #children do
    local c = children[i]
    if c.kind == "it" then
      report_fail(ctx, join(names, c.name), { { phase, err, tb } }, c.pos)
    elseif c.kind == "pending" then
      report_pending(ctx, join(names, c.name), nil, c.pos)
    elseif c.kind == "error" then
      report_fail(ctx, join(names), { { "describe", c.err } })
    elseif c.kind == "describe" then
      fail_block(ctx, c.block, sub_names(names, c.block.name), phase, err, tb)
    end
  end
end

local function scope_begin()
  if doubles then
    return doubles.scope_begin()
  end
end

local function scope_end(mark)
  if doubles then
    doubles.scope_end(mark)
  end
end

local function run_test(ctx, test, names, befores, afters)
  local name = join(names, test.name)
  local errs = {}
  local pending_reason, is_pend = nil, false
  reset_failures()
  local mark = scope_begin() -- spies and stubs made by the test are reverted
  state.finally = {}
  for i = 1, #befores do
    local ok, err, tb = call_user(befores[i], name .. " (before_each)")
    if not ok then
      if is_pending(err) then
        is_pend, pending_reason = true, err.reason
      else
        errs[#errs + 1] = { "before_each", err, tb }
      end
      break
    end
  end
  if #errs == 0 and not is_pend then
    local ok, err, tb = call_user(test.fn, name)
    if not ok then
      if is_pending(err) then
        is_pend, pending_reason = true, err.reason
      else
        errs[#errs + 1] = { nil, err, tb }
      end
    end
  end
  local finals = state.finally
  state.finally = nil
  for i = #finals, 1, -1 do
    local ok, err, tb = call_user(finals[i], name .. " (finally)")
    if not ok then
      errs[#errs + 1] = { "finally", err, tb }
    end
  end
  -- after_each always runs, even when before_each or the body failed
  for i = 1, #afters do
    local ok, err, tb = call_user(afters[i], name .. " (after_each)")
    if not ok then
      errs[#errs + 1] = { "after_each", err, tb }
    end
  end
  scope_end(mark)
  if #errs > 0 then
    report_fail(ctx, name, errs, test.pos)
  elseif is_pend then
    report_pending(ctx, name, pending_reason, test.pos)
  else
    report_ok(ctx, name, test.pos)
  end
end

-- --list: the selected tests' positions and names, nothing run
local function list_block(ctx, block, names)
  local children = visible(ctx, block, names)
  for i = 1, #children do
    local c = children[i]
    if c.kind == "it" or c.kind == "pending" then
      told(ctx, "list", join(names, c.name), nil, c.pos)
    elseif c.kind == "describe" then
      list_block(ctx, c.block, sub_names(names, c.block.name))
    end
  end
end

local function run_block(ctx, block, names, befores, afters)
  if block.name ~= nil then
    names = sub_names(names, block.name)
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

  local snap = block.insulate and snapshot()
  local mark = scope_begin() -- doubles made in setup live until teardown
  -- setup/teardown only run for blocks that contain tests to run
  local runnable = count_runnable(ctx, block, names) > 0
  local setup_err, setup_tb, setup_failed = nil, nil, false
  if runnable then
    for i = 1, #block.setup do
      reset_failures()
      local ok, err, tb = call_user(block.setup[i], join(names, "(setup)"))
      if not ok then
        setup_err, setup_tb, setup_failed = err, tb, true
        break
      end
    end
  end

  if setup_failed then
    fail_block(ctx, block, names, "setup", setup_err, setup_tb)
  else
    local children = visible(ctx, block, names)
    for i = 1, #children do
      local c = children[i]
      if c.kind == "describe" then
        run_block(ctx, c.block, names, my_befores, my_afters)
      elseif c.kind == "it" then
        run_test(ctx, c, names, my_befores, my_afters)
      elseif c.kind == "pending" then
        report_pending(ctx, join(names, c.name), nil, c.pos)
      elseif c.kind == "error" then
        report_fail(ctx, join(names), { { "describe", c.err } })
      end
    end
  end

  if runnable then
    -- teardown runs even after a failed setup, to undo a partial setup
    for i = 1, #block.teardown do
      reset_failures()
      local ok, err, tb = call_user(block.teardown[i], join(names, "(teardown)"))
      if not ok then
        report_fail(ctx, join(names, "(teardown)"), { { "teardown", err, tb } })
      end
    end
  end
  scope_end(mark)
  if snap then
    restore(snap)
  end
end

local function list_of(v)
  if v == nil then
    return {}
  elseif type(v) == "string" then
    return { v }
  end
  return v
end

-- Runs every registered test, writes the report through write(line) and
-- returns passed, failed, skipped, errors. The registry is reset first, so
-- tests registered from here on belong to the next run.
function M.run(write, opts)
  if write == nil then
    write = print
  end
  opts = opts or {}
  local root = state.root
  M.reset()
  state.call = opts.call
  local ctx = {
    write = write, report = opts.report, rand = opts.rand,
    passed = 0, failed = 0, skipped = 0, errors = 0,
    select = {
      filter = list_of(opts.filter), filter_out = list_of(opts.filter_out),
      tags = list_of(opts.tags), exclude_tags = list_of(opts.exclude_tags),
    },
  }
  if opts.list then
    list_block(ctx, root, {})
    state.call = nil
    return 0, 0, 0, 0
  end
  run_block(ctx, root, {}, {}, {})
  state.call = nil
  if opts.summary ~= false then
    local summary = ctx.passed .. " passed, " .. ctx.failed .. " failed"
    if ctx.errors > 0 then
      summary = summary .. ", " .. ctx.errors .. (ctx.errors == 1 and " error" or " errors")
    end
    if ctx.skipped > 0 then
      summary = summary .. ", " .. ctx.skipped .. " skipped"
    end
    write(summary)
  end
  return ctx.passed, ctx.failed, ctx.skipped, ctx.errors
end

return M
