---@meta shield
-- LuaLS type definitions for the `shield` library of shield_global
-- (github.com/shieldrt/shieldglobal). This file is for editors only: the
-- runtime never loads it. Point LuaLS at it with
--   "workspace.library": ["<path to>/lua/shield"]
-- The library is available both as the global `shield` and as require("shield").
--
-- Availability depends on the configuration:
--   * sleep, spawn, now_ms, owner, log: always;
--   * global: when global.enabled is true (the default);
--   * mutex, rwlock, spinlock, distributed_mutex, distributed_rwlock, lock:
--     when global.enabled and lock.enabled are true (the defaults);
--   * scheduler: when global.enabled and scheduler.enabled are true (the defaults).
--
-- Durations are milliseconds. Calls marked "blocking" suspend only the calling
-- task (see docs/runtime.md); they raise "cannot block here" inside
-- metamethods, for-in iterators, table.sort comparators, string.gsub
-- callbacks, the top level of a required module, and Lua called from Go.

---@class shield
shield = {}

-- ---------------------------------------------------------------------------
-- Basics
-- ---------------------------------------------------------------------------

--- Suspends the calling task for `ms` milliseconds (>= 0, fractions allowed).
--- `sleep(0)` lets the other tasks run first. Blocking.
---@param ms number
function shield.sleep(ms) end

--- Starts `fn(...)` as a new task on the next loop turn and returns at once.
--- An uncaught error in `fn` is logged with its traceback and counted.
---@param fn function
---@param ... any arguments passed to `fn`
function shield.spawn(fn, ...) end

--- Current Unix time in milliseconds.
---@return integer
function shield.now_ms() end

--- Identity of the running task, as used for lock owners:
--- `"node_id:service_id:coroutine-<instance>-<n>"`
--- (`"node_id:service_id:main-<instance>"` outside any task).
---@return string
function shield.owner() end

--- Structured logging through the host's log/slog logger. `msg` may be any
--- non-nil value (converted with tostring). `fields` is a flat table of
--- attributes; numbers, booleans and strings keep their type, other values are
--- logged as their tostring. Inside a task the attribute `task` is added.
---@class shield.log
shield.log = {}

---@param msg any
---@param fields? table<string, any>
function shield.log.debug(msg, fields) end

---@param msg any
---@param fields? table<string, any>
function shield.log.info(msg, fields) end

---@param msg any
---@param fields? table<string, any>
function shield.log.warn(msg, fields) end

---@param msg any
---@param fields? table<string, any>
function shield.log.error(msg, fields) end

-- ---------------------------------------------------------------------------
-- shield.global(): KV, local cache, pub/sub (docs/global.md, docs/pubsub.md)
-- ---------------------------------------------------------------------------

--- Returns the global-data object of this Lua state (the same object every
--- time). Nil when global.enabled is false.
---@return shield.global
function shield.global() end

--- Values: nil, booleans, finite numbers, strings (binary-safe) and tables of
--- those (keys: strings, finite numbers, booleans; no cycles, at most 100
--- levels deep). Functions, userdata, threads, NaN and +-Inf cannot be stored.
---@alias shield.value nil|boolean|number|string|table

--- Methods of shield.global(); call them with ':'. Keys are non-empty strings.
--- On Redis every method is blocking; failures raise
--- "shield.global:<method>: kv: <op> \"<key>\": <cause>".
---@class shield.global
local global = {}

--- Stores `value` under `key`. With `ttl_ms` (a positive number of ms) the key
--- expires; without it the key has no expiry (a previous expiry is cleared).
--- `value == nil` deletes the key.
---@param key string
---@param value shield.value
---@param ttl_ms? number
---@return true
function global:set(key, value, ttl_ms) end

--- Returns the value of `key`, or nil when it is missing or expired.
---@param key string
---@return shield.value
function global:get(key) end

--- Deletes `key`; returns whether it existed.
---@param key string
---@return boolean existed
function global:delete(key) end

--- Stores every `key = value` pair of `values` with the same ttl rule as set.
--- Atomic on memory and standalone Redis; atomic per hash slot on Cluster.
---@param values table<string, shield.value>
---@param ttl_ms? number
---@return true
function global:mset(values, ttl_ms) end

--- Returns a table keyed by key; missing keys are absent from it.
--- Also callable with one list: `g:mget({ "k1", "k2" })`.
---@param ... string
---@return table<string, shield.value>
---@overload fun(self: shield.global, keys: string[]): table<string, shield.value>
function global:mget(...) end

--- Atomically adds `delta` (default 1) to the number under `key` and returns
--- the new value. A missing key counts from 0; an existing key keeps its TTL.
--- Raises "kv: value is not a number" when the value is not a number.
---@param key string
---@param delta? number
---@return number
function global:incr(key, delta) end

--- Atomically subtracts `delta` (default 1); see incr.
---@param key string
---@param delta? number
---@return number
function global:decr(key, delta) end

--- Reads `key` through the process-local cache: a cached copy is returned
--- without a backend call; otherwise the value is read and, if the key exists,
--- cached for `ttl_ms` (default global.cache.default_ttl).
---@param key string
---@param ttl_ms? number
---@return shield.value
function global:get_cached(key, ttl_ms) end

--- Evicts `key` from this process's cache and, with global.cache.sync, from
--- every other process's cache. The stored value is not touched.
---@param key string
function global:invalidate(key) end

--- Subscribes to `channel`; returns once the subscription is confirmed.
--- `fn` runs as a task of its own for every message, may block, and gets the
--- subscription's messages one at a time, in order.
---@param channel string
---@param fn fun(channel: string, message: shield.value)
---@return shield.subscription
function global:subscribe(channel, fn) end

--- Subscribes to a Redis glob pattern (* ? [abc] [^a] [a-z] \x).
---@param pattern string
---@param fn fun(channel: string, message: shield.value, pattern: string)
---@return shield.subscription
function global:psubscribe(pattern, fn) end

--- Publishes `message` to `channel`; returns the number of receivers as
--- Redis counts them (1 per subscribed process plus 1 per distinct matching
--- pattern per process).
---@param channel string
---@param message shield.value
---@return integer receivers
function global:publish(channel, message) end

---@class shield.subscription
local subscription = {}

--- Stops the subscription: no message is delivered after it returns. Idempotent.
function subscription:unsubscribe() end

-- ---------------------------------------------------------------------------
-- Locks (docs/locks.md)
-- ---------------------------------------------------------------------------

--- Options of every lock constructor and of shield.lock():acquire.
--- Defaults come from the `lock` section of the configuration.
---@class shield.lock_options
---@field ttl? number lease in ms (distributed default lock.default_ttl; in-process: none); <= lock.max_ttl
---@field retry? number distributed: fallback retry interval in ms
---@field max_retries? integer distributed: give up after this many attempts (0 = unlimited)
---@field reentrant? boolean the holding task may acquire again
---@field wait? number default acquire timeout in ms (0 = forever)
---@field fair? boolean distributed: FIFO across processes
---@field auto_extend? boolean renew the lease while held (needs a ttl)
---@field extend_interval? number watchdog period in ms, shorter than ttl
---@field on_lost? fun(name: string, reason: string) runs as a task when a hold is found lost

--- Holder of a lock, as returned by owner() and info().owner.
---@class shield.lock_owner
---@field node_id string
---@field service_id integer|string
---@field service_name? string present when the holder has this process's node_id and service_id
---@field thread_id string e.g. "coroutine-1a2b3c4d-7"

---@class shield.lock_info
---@field key string the lock name
---@field owner shield.lock_owner
---@field acquired_at integer Unix ms
---@field ttl integer remaining lease in ms, -1 for no expiry
---@field reentrant_count integer
---@field token? integer fencing token (distributed locks)
---@field owners string[] every holder's owner string (several for read locks), sorted

--- A lock: shield.mutex, shield.spinlock, shield.distributed_mutex, a side of
--- an rwlock, or a handle from shield.lock(). The owner is the calling task.
---@class shield.lock_object
local lock_object = {}

--- Waits until granted, or up to `timeout_ms` (default: the `wait` option,
--- 0 = forever). `acquire(0)` tries once. Blocking.
---@param timeout_ms? number
---@return boolean ok
---@return "timeout"? reason
function lock_object:acquire(timeout_ms) end

--- One attempt; never waits for the lock.
---@return boolean
function lock_object:try_acquire() end

--- Releases one hold of the calling task (a re-entrant lock needs one release
--- per acquire).
---@return boolean ok
---@return ("not_held"|"lost")? reason
function lock_object:release() end

--- Acquires, runs `fn(...)`, releases, also when `fn` raises (the error is
--- re-raised). Raises when the lock cannot be acquired or was lost while
--- `fn` ran. Returns what `fn` returned.
---@param fn function
---@param ... any
---@return any ...
function lock_object:with(fn, ...) end

--- Sets the remaining lease of the calling task's hold to `ms` (<= lock.max_ttl).
---@param ms number
---@return boolean ok
---@return "not_held"? reason
function lock_object:extend(ms) end

--- Starts or stops the watchdog for the calling task's hold.
---@param enabled boolean
---@param interval_ms? number
function lock_object:auto_extend(enabled, interval_ms) end

--- The current holder, or nil when the lock is free.
---@return shield.lock_owner?
function lock_object:owner() end

--- Remaining lease in ms (-1: no expiry), or nil when the lock is free.
---@return integer?
function lock_object:ttl() end

--- Lock information, or nil when the lock is free.
---@return shield.lock_info?
function lock_object:info() end

--- The fencing token of the calling task's hold (distributed locks), or nil.
---@return integer?
function lock_object:token() end

--- True once the watchdog found the calling task's hold gone.
---@return boolean
function lock_object:lost() end

--- Sets the callback run (as a task) when a hold of this lock is found lost.
---@param fn fun(name: string, reason: string)
function lock_object:on_lost(fn) end

--- The lock name.
---@return string
function lock_object:name() end

--- A read-write lock: two lock objects sharing one name.
---@class shield.rwlock
local rwlock = {}

--- The shared (read) side.
---@return shield.lock_object
function rwlock:read_lock() end

--- The exclusive (write) side.
---@return shield.lock_object
function rwlock:write_lock() end

--- shield.lock(): acquire distributed locks by name and get held handles.
---@class shield.lock_manager
local lock_manager = {}

--- Waits up to `opts.wait` ms (0 = forever) and returns a held handle, or
--- nil, "timeout".
---@param name string
---@param opts? shield.lock_options
---@return shield.lock_object? handle
---@return "timeout"? reason
function lock_manager:acquire(name, opts) end

--- One attempt: a held handle, or nil.
---@param name string
---@param opts? shield.lock_options
---@return shield.lock_object?
function lock_manager:try_acquire(name, opts) end

--- In-process mutex, shared by every Lua state of the process.
---@param name string
---@param opts? shield.lock_options
---@return shield.lock_object
function shield.mutex(name, opts) end

--- In-process spinlock: a short busy-wait, then the FIFO queue.
---@param name string
---@param opts? shield.lock_options
---@return shield.lock_object
function shield.spinlock(name, opts) end

--- In-process read-write lock.
---@param name string
---@param opts? shield.lock_options
---@return shield.rwlock
function shield.rwlock(name, opts) end

--- Distributed mutex (Redis, or the memory backend without Redis).
---@param name string
---@param opts? shield.lock_options
---@return shield.lock_object
function shield.distributed_mutex(name, opts) end

--- Distributed read-write lock.
---@param name string
---@param opts? shield.lock_options
---@return shield.rwlock
function shield.distributed_rwlock(name, opts) end

--- The lock manager.
---@return shield.lock_manager
function shield.lock() end

-- ---------------------------------------------------------------------------
-- Scheduler (docs/scheduler.md)
-- ---------------------------------------------------------------------------

--- Options of a scheduled task. Defaults come from the `scheduler` section
--- of the configuration.
---@class shield.scheduler_options
---@field timezone? string IANA zone of a cron schedule (default scheduler.timezone, "UTC")
---@field distributed? boolean each firing runs once across every process sharing Redis (default false)
---@field lock_ttl? number ms; lease of a distributed firing's claim (default scheduler.distributed.lock_ttl)
---@field max_retries? integer retries of a failed firing (default scheduler.retry.max_retries)
---@field retry_delay? number ms before each retry (default scheduler.retry.retry_delay)
---@field on_error? fun(err: string, info: shield.scheduler_firing) runs as a task after each failed attempt
---@field overlap? "skip"|"allow" a firing while the previous run goes on: skipped and counted (default), or run alongside
---@field catch_up? number ms; how old a missed firing may be and still run (default 60000)
---@field on_redis_down? "wait"|"run_local" a distributed firing with Redis unreachable: wait for it (default), or run here

--- What a run receives: which firing it is.
---@class shield.scheduler_firing
---@field task string
---@field scheduled integer the firing's scheduled time, Unix ms (its identity: retries keep it)
---@field attempt integer 1, then 2 for the first retry, ...
---@field manual boolean started by scheduler:trigger
---@field recovered boolean re-run of a firing whose runner died
---@field late boolean waited for Redis to come back
---@field local boolean distributed firing run without a claim (on_redis_down = "run_local")

--- What an event listener receives beside the task name.
---@class shield.scheduler_event: shield.scheduler_firing
---@field event "before"|"after"|"failed"|"skipped"|"missed"
---@field started? integer Unix ms (after, failed)
---@field duration? number ms (after, failed)
---@field error? string (failed)
---@field final? boolean failed: no retry follows
---@field count? integer missed: firings it stands for

---@class shield.scheduler_task_info
---@field name string
---@field kind "cron"|"interval"|"once"
---@field schedule string
---@field timezone? string cron tasks
---@field status "active"|"paused"|"error"
---@field next_run? integer Unix ms
---@field last_run? integer Unix ms
---@field run_count integer
---@field missed integer
---@field skipped integer
---@field late integer
---@field failed integer
---@field last_error? string
---@field distributed boolean
---@field running integer runs in progress in this process
---@field registered boolean false for a distributed task only another process registered

--- A task as of the call that returned it; refresh() reads it again.
---@class shield.scheduler_task
local scheduler_task = {}

---@return string
function scheduler_task:name() end

--- The cron text, the interval (or one-shot delay) in ms as a string, or "at:<unix s>".
---@return string
function scheduler_task:schedule() end

--- Next fire time (Unix ms), nil when none (paused; a one-shot task that ran).
---@return integer?
function scheduler_task:next_run() end

--- Start of the latest run (Unix ms), nil before the first.
---@return integer?
function scheduler_task:last_run() end

---@return integer
function scheduler_task:run_count() end

---@return "active"|"paused"|"error"
function scheduler_task:status() end

---@return shield.scheduler_task_info
function scheduler_task:info() end

--- Reads the task again. Blocking (a distributed task on Redis).
---@return shield.scheduler_task|nil task
---@return "not_found"|nil reason
function scheduler_task:refresh() end

---@class shield.scheduler
local scheduler = {}

--- Registers (or updates) a cron task: five fields, a descriptor, or
--- daily:HH:MM / hourly:MM / cron:<expr>. Blocking (distributed, Redis).
---@param name string
---@param expr string
---@param fn fun(info: shield.scheduler_firing)
---@param opts? shield.scheduler_options
---@return shield.scheduler_task
function scheduler:cron(name, expr, fn, opts) end

--- Registers an interval task: every `ms` (> 0). Blocking (distributed, Redis).
---@param name string
---@param ms number
---@param fn fun(info: shield.scheduler_firing)
---@param opts? shield.scheduler_options
---@return shield.scheduler_task
function scheduler:interval(name, ms, fn, opts) end

--- Registers a one-shot task, `delay_ms` (>= 0) from now; removed after it runs.
---@param name string
---@param delay_ms number
---@param fn fun(info: shield.scheduler_firing)
---@param opts? shield.scheduler_options
---@return shield.scheduler_task
function scheduler:once(name, delay_ms, fn, opts) end

--- Registers a task from seed 001's formats: every:60 every:30s every:5m
--- every:1h daily:03:00 hourly:30 cron:<expr> at:<unix s>, or a bare cron.
---@param name string
---@param expression string
---@param fn fun(info: shield.scheduler_firing)
---@param opts? shield.scheduler_options
---@return shield.scheduler_task
function scheduler:add(name, expression, fn, opts) end

--- Blocking (distributed, Redis).
---@param name string
---@return shield.scheduler_task|nil task
---@return "not_found"|nil reason
function scheduler:get(name) end

--- The tasks registered in this process, by name. Blocking.
---@return shield.scheduler_task[]
function scheduler:list() end

--- Pauses a task (in every process, for a distributed one). Blocking.
---@param name string
---@return true|nil ok
---@return "not_found"|nil reason
function scheduler:pause(name) end

--- Resumes a paused task from now. Blocking.
---@param name string
---@return true|nil ok
---@return "not_found"|nil reason
function scheduler:resume(name) end

--- Removes a task (in every process, for a distributed one). Blocking.
---@param name string
---@return true|nil ok
---@return "not_found"|nil reason
function scheduler:remove(name) end

--- Runs a task registered in this process once, now.
---@param name string
---@return true|nil ok
---@return "not_found"|nil reason
function scheduler:trigger(name) end

--- The next n (1..10000) fire times of an expression (add's formats), Unix ms.
---@param expression string
---@param n integer
---@param timezone? string
---@return integer[]
function scheduler:preview(expression, n, timezone) end

--- Listens to the lifecycle events of the tasks this runtime registered.
---@param event "before"|"after"|"failed"|"skipped"|"missed"
---@param fn fun(task_name: string, info: shield.scheduler_event)
function scheduler:on(event, fn) end

--- Registers every *.lua file of dir, each returning
--- { name = ..., expression = ..., handle = function(info) end, ...options }.
--- Returns the task names. Blocking.
---@param dir string
---@return string[]
function scheduler:load(dir) end

--- The scheduler (one per runtime, sharing the process's engine).
---@return shield.scheduler
function shield.scheduler() end

return shield
