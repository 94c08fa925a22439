-- <shield>/prelude.lua — run once per Lua state by the runtime.
--
-- Receives the runtime's private table `rt`:
--   rt.mark     marker a blocking Go call yields first (followed by its operation)
--   rt.fail     marker a blocking call is resumed with when it failed (followed by the message)
--   rt.done     marker a pooled task thread yields when its task function returned
--   rt.arm      Go function: installs the traceback hook on the running task thread
--   rt.create   Go coroutine.create: the thread gets the runtime's small stacks and interrupt context
--   rt.busy     Go function: busy(co, fn) -> why co may not be resumed by a script (it waits in a
--               shield call, or it is a task's own thread), or nil
--   rt.callable Go function: callable(v) -> true when v can be called (a function, or __call)
--   rt.adopt, rt.disown, rt.running   Go functions: see adopt below
--   rt.where    Go function: where() -> "file:line: " of the nearest script frame (not ours), or ""
--   rt.relocate Go function: relocate(err) -> err, with a runtime position it starts with
--               (a Go function pcall called raised at our call site) made the script's
-- Returns a table: { wrap = fn(raw) -> blocking-call wrapper, task = task thread body,
-- with = the l:with(fn) helper of lock objects }.
--
-- Why this exists (see docs/runtime.md): gopher-lua cannot yield across a Go
-- re-entry into the VM, so pcall/xpcall and coroutine.resume/wrap are rebuilt
-- here in plain Lua: protected calls run in pooled child coroutines and every
-- yield from inside is passed up to the task (Lua 5.2 semantics).
local rt = ...
local MARK, FAIL, DONE = rt.mark, rt.fail, rt.done
local busy, callable, create, where, relocate = rt.busy, rt.callable, rt.create, rt.where, rt.relocate
local co_resume, co_yield, co_status = coroutine.resume, coroutine.yield, coroutine.status
local error, select, type, tostring = error, select, type, tostring

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

-- adopt(co) records that the pooled pcall worker co runs on behalf of the
-- calling coroutine, so coroutine.running() (Go, rt.running) is not fooled;
-- disown(co) forgets it. (In Go: a Lua table keyed by threads would keep
-- every key forever, as gopher-lua never frees non-string keys.)
local adopt, disown = rt.adopt, rt.disown
coroutine.running = rt.running

-- pass resumes a child coroutine; when the child suspended inside a blocking
-- shield call it is yielding MARK: pass that yield up to our own resumer and
-- hand the results back down, so the child blocks instead of returning.
local function pass(co, ok, ...)
	if ok and (...) == MARK and co_status(co) == "suspended" then
		return pass(co, co_resume(co, co_yield(...)))
	end
	return ok, ...
end

coroutine.create = create

function coroutine.resume(co, ...)
	local why = busy(co, "resume")
	if why then
		return false, "cannot resume non-suspended coroutine (" .. why .. ")"
	end
	return pass(co, co_resume(co, ...))
end

function coroutine.status(co)
	if busy(co, "status") then
		return "normal"
	end
	return co_status(co)
end

local function unwrap(ok, ...)
	if not ok then
		error((...), 0)
	end
	return ...
end

function coroutine.wrap(f)
	if type(f) ~= "function" then
		error(where() .. "bad argument #1 to 'wrap' (function expected, got " .. type(f) .. ")", 0)
	end
	local co = create(f)
	return function(...)
		local why = busy(co)
		if why then
			error(where() .. "cannot resume non-suspended coroutine (" .. why .. ")", 0)
		end
		if co_status(co) == "dead" then
			error(where() .. "cannot resume dead coroutine", 0)
		end
		return unwrap(pass(co, co_resume(co, ...)))
	end
end

-- Yield-safe pcall: f runs in a pooled worker coroutine; every yield from it
-- (a blocking shield call, or the user's own coroutine.yield) goes up to our
-- resumer and the results come back down. A worker that raised is dead and
-- dropped; one that finished goes back to the pool, which keeps at most
-- POOL idle workers (a burst of concurrent pcalls does not pin memory). A
-- worker's loop tail-calls itself once per call, and gopher-lua counts each
-- tail call as a stack level that debug.traceback walks: a worker retires
-- after RETIRE calls (runs[i] counts pool[i]'s; settle carries the count of
-- the worker it drives), as task threads do.
local POOL, RETIRE = 64, 512
local pool, runs, npool = {}, {}, 0

local function call(f, ...)
	return DONE, f(...)
end

local function worker(...)
	return worker(co_yield(call(...)))
end

local function settle(co, n, ok, ...)
	if not ok then
		disown(co)
		return false, relocate((...))
	end
	if (...) == DONE then
		disown(co)
		if npool < POOL and n + 1 < RETIRE then
			npool = npool + 1
			pool[npool], runs[npool] = co, n + 1
		end
		return true, select(2, ...)
	end
	return settle(co, n, co_resume(co, co_yield(...)))
end

function pcall(...)
	if select("#", ...) == 0 then
		error(where() .. "bad argument #1 to 'pcall' (value expected)", 0)
	end
	local f = ...
	if not callable(f) then
		return false, "attempt to call a " .. type(f) .. " value"
	end
	local co, n = nil, 0
	if npool > 0 then
		co, n = pool[npool], runs[npool]
		pool[npool], runs[npool] = nil, nil
		npool = npool - 1
	else
		co = create(worker)
	end
	adopt(co)
	return settle(co, n, co_resume(co, ...))
end

local ypcall = pcall

local function xsettle(handler, ok, ...)
	if ok then
		return true, ...
	end
	-- An error inside the handler is the result, as in stock gopher-lua.
	return false, select(2, ypcall(handler, ...))
end

-- xpcall(f, handler, ...): Lua 5.2 form (extra arguments go to f). The handler
-- runs after the failed call has unwound, so debug.traceback inside it shows
-- the caller's stack; uncaught task errors carry the full traceback instead.
function xpcall(f, handler, ...)
	if type(handler) ~= "function" then
		error(where() .. "bad argument #2 to 'xpcall' (function expected, got " .. type(handler) .. ")", 0)
	end
	return xsettle(handler, ypcall(f, ...))
end

-- l:with(fn, ...): acquire, run fn, release — also when fn raises (the
-- error is re-raised). fn may block. A lock lost while fn ran (its lease ran
-- out or was taken over) is an error too: the critical section was unsafe.
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
		error(where() .. tostring(l) .. ": bad argument #1 to 'with' (function expected, got " .. type(fn) .. ")", 0)
	end
	local ok, why = l:acquire()
	if not ok then
		error(where() .. tostring(l) .. ":with: could not acquire the lock (" .. tostring(why) .. ")", 0)
	end
	return release_after(l, ypcall(fn, ...))
end

-- Task threads are pooled: task(f, ...) is the body of a thread, which runs
-- f(...) and then, instead of ending, yields DONE with f's results and waits
-- for the next task function. f runs one level down (a Go function
-- tail-called at the outermost level of a coroutine would end the coroutine
-- in gopher-lua v1.1.2). A task that raised leaves its thread dead.
local arm = rt.arm
local function run(f, ...)
	return DONE, f(...)
end
local function loop(...)
	return loop(co_yield(run(...)))
end
local function task(...)
	arm()
	return loop(...)
end

return { wrap = wrap, task = task, with = with }
