-- <shield>/prelude.lua — run once per Lua state by the runtime.
--
-- Receives the runtime's private table `rt`:
--   rt.mark   marker a blocking Go call yields first (followed by its operation)
--   rt.fail   marker a blocking call is resumed with when it failed (followed by the message)
--   rt.arm    Go function: installs the traceback hook on the running task thread
-- Returns a table: { wrap = fn(raw) -> blocking-call wrapper, task = task body
-- trampoline, with = the l:with(fn) helper of lock objects }.
--
-- Why this exists (see docs/runtime.md): gopher-lua cannot yield across a Go
-- re-entry into the VM, so pcall/xpcall and coroutine.resume/wrap are rebuilt
-- here in plain Lua: protected calls run in pooled child coroutines and every
-- yield from inside is passed up to the task (Lua 5.2 semantics).
local rt = ...
local MARK, FAIL = rt.mark, rt.fail
local co_create, co_resume, co_yield, co_status =
	coroutine.create, coroutine.resume, coroutine.yield, coroutine.status
local error, select = error, select

-- finish returns what a blocking Go call produced. When the call yielded, the
-- runtime resumed it with its results, or with FAIL and a message that already
-- carries the caller's position. (Resuming into this multi-value call site is
-- safe for any number of values, unlike a fixed-count site in user code.)
local function finish(...)
	if (...) == FAIL then
		error((select(2, ...)), 0)
	end
	return ...
end

local function wrap(raw)
	return function(...)
		return finish(raw(...))
	end
end

-- pass resumes a child coroutine; when the child suspended inside a blocking
-- shield call it is yielding MARK: pass that yield up to our own resumer and
-- hand the results back down, so the child blocks instead of returning.
local function pass(co, ok, ...)
	if ok and (...) == MARK and co_status(co) == "suspended" then
		return pass(co, co_resume(co, co_yield(...)))
	end
	return ok, ...
end

function coroutine.resume(co, ...)
	return pass(co, co_resume(co, ...))
end

local function unwrap(ok, ...)
	if not ok then
		error((...), 0)
	end
	return ...
end

function coroutine.wrap(f)
	local co = co_create(f)
	return function(...)
		return unwrap(pass(co, co_resume(co, ...)))
	end
end

-- Yield-safe pcall: f runs in a pooled worker coroutine; every yield from it
-- (a blocking shield call, or the user's own coroutine.yield) goes up to our
-- resumer and the results come back down. A worker that raised is dead and
-- dropped; one that finished goes back to the pool.
local DONE = {}
local pool, npool = {}, 0

local function call(f, ...)
	return DONE, f(...)
end

local function worker(...)
	return worker(co_yield(call(...)))
end

local function settle(co, ok, ...)
	if not ok then
		return false, ...
	end
	if (...) == DONE then
		npool = npool + 1
		pool[npool] = co
		return true, select(2, ...)
	end
	return settle(co, co_resume(co, co_yield(...)))
end

function pcall(f, ...)
	local co
	if npool > 0 then
		co = pool[npool]
		pool[npool] = nil
		npool = npool - 1
	else
		co = co_create(worker)
	end
	return settle(co, co_resume(co, f, ...))
end

local function xsettle(handler, ok, ...)
	if ok then
		return true, ...
	end
	return false, handler(...)
end

-- xpcall(f, handler, ...): Lua 5.2 form (extra arguments go to f). The handler
-- runs after the failed call has unwound, so debug.traceback inside it shows
-- the caller's stack; uncaught task errors carry the full traceback instead.
function xpcall(f, handler, ...)
	return xsettle(handler, pcall(f, ...))
end

-- l:with(fn, ...): acquire, run fn, release — also when fn raises (the
-- error is re-raised). fn may block. A lock lost while fn ran (its lease ran
-- out or was taken over) is an error too: the critical section was unsafe.
local ypcall = pcall
local function release_after(l, ok, ...)
	local released, why = l:release()
	if not ok then
		error((...), 0)
	end
	if not released then
		error(tostring(l) .. ":with: the lock was " .. tostring(why) .. " before the function returned", 0)
	end
	return ...
end

local function with(l, fn, ...)
	if type(fn) ~= "function" then
		error(tostring(l) .. ": bad argument #1 to 'with' (function expected, got " .. type(fn) .. ")", 2)
	end
	local ok, why = l:acquire()
	if not ok then
		error(tostring(l) .. ":with: could not acquire the lock (" .. tostring(why) .. ")", 2)
	end
	return release_after(l, ypcall(fn, ...))
end

-- Task trampoline: the body of every task runs one level down (a Go function
-- tail-called at the outermost level of a coroutine would end the coroutine
-- in gopher-lua v1.1.2).
local arm = rt.arm
local function ret(...)
	return ...
end
local function task(f, ...)
	arm()
	return ret(f(...))
end

return { wrap = wrap, task = task, with = with }
