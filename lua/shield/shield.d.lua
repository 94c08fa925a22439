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
--   * rank: when global.enabled and rank.enabled are true (the defaults);
--   * queue, delay_queue, priority_queue, reliable_queue, broadcast_queue:
--     when global.enabled and queue.enabled are true (the defaults);
--   * rate_limiter: when global.enabled and rate_limiter.enabled are true
--     (the defaults);
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

--- Suspends the calling task for `ms` milliseconds (>= 0, at most 1e12,
--- fractions allowed). `sleep(0)` lets the other tasks run first;
--- `sleep(math.huge)` sleeps until the runtime closes. Blocking.
---@param ms number
function shield.sleep(ms) end

--- Starts `fn(...)` as a new task on the next loop turn and returns at once.
--- It starts before any task a timer or a Redis reply resumes on that turn:
--- after `shield.spawn(f); shield.sleep(1)`, `f` has run to its first
--- blocking call. An uncaught error in `fn` is logged with its traceback and
--- counted.
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

--- Spec files only (`shield test`): the virtual clock (docs/testing.md,
--- "Virtual time"). Outside virtual time advance and set_time raise.
---@class shield.test
shield.test = {}

--- Moves the virtual clock `ms` forward: the calling task sleeps while every
--- timer due on the way fires in order. Blocking.
---@param ms number
function shield.test.advance(ms) end

--- Moves the virtual clock forward to `t`: Unix ms, an RFC 3339 string
--- (`"2025-03-10T00:00:00Z"`) or a table of UTC fields (`year`, `month`,
--- `day`, optional `hour`, `min`, `sec`). Never back. Blocking.
---@param t number|string|table
function shield.test.set_time(t) end

--- true when the file runs in virtual time.
---@return boolean
function shield.test.virtual() end

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
--- On Redis every method but cache_stats is blocking; failures raise
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

--- This process's local cache (the one cache of the Module, shared by every
--- Lua state): what Module.CacheStats() and /ops/global report. Never waits.
---@class shield.cache_stats
---@field enabled boolean false when global.cache.enabled is false (every other field is then 0)
---@field size integer entries cached now (some may have expired and not been dropped yet)
---@field hits integer get_cached lookups served from the cache
---@field misses integer get_cached lookups that read the backend (also while the cache is bypassed)
---@field hit_rate number hits / (hits + misses), 0 before the first lookup

---@return shield.cache_stats
function global:cache_stats() end

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
---@field retry? number every lock kind: the longest wait in ms between two attempts when no release wakes the waiter (default lock.retry)
---@field max_retries? integer every lock kind: give up with false, "timeout" after this many attempts (default lock.max_retries; 0 = unlimited; 1 = one attempt, no waiting)
---@field reentrant? boolean the holding task may acquire again (default lock.reentrant)
---@field wait? number default acquire timeout in ms (0 = forever)
---@field fair? boolean distributed: FIFO across processes (default lock.fair.enabled)
---@field auto_extend? boolean renew the lease while held (needs a ttl; distributed default lock.auto_extend.enabled, in-process false)
---@field extend_interval? number watchdog period in ms, shorter than ttl (default lock.auto_extend.interval)
---@field on_lost? fun(name: string, reason: string) runs as a task when a hold is found lost

--- Holder of a lock, as returned by owner() and info().owner.
---@class shield.lock_owner
---@field node_id string
---@field service_id? integer the holder's global.service_id (absent for an owner string of another form, written by some other client)
---@field service_name? string the holder's global.service_name, stored with a distributed hold (so also for a holder in another process); for an in-process lock, this process's
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
--- an rwlock, or a handle from shield.lock() (the classes below; error
--- messages name the kind, e.g. "shield.rwlock:read_lock"). The owner is the
--- calling task: its holds are released when it ends (with a warning), at
--- the latest when a shutdown interrupts it after the grace period.
---@class shield.lock_object
local lock_object = {}

---@class shield.mutex: shield.lock_object
---@class shield.spinlock: shield.lock_object
---@class shield.distributed_mutex: shield.lock_object

--- A held handle from shield.lock():acquire / try_acquire: an exclusive
--- distributed lock of that name, with every lock method.
---@class shield.lock_handle: shield.lock_object

--- Waits until granted, or up to `timeout_ms` (default: the `wait` option,
--- 0 = forever). `acquire(0)` tries once. Attempts follow `retry` and
--- `max_retries`. Raises when a non-reentrant lock is already held by this
--- task, when a reader asks for the write side, and when Redis did not
--- answer for a good part of the timeout. false, "lost": a re-entry of
--- this task's hold, which is lost (lost() is true). Blocking.
---@param timeout_ms? number
---@return boolean ok
---@return ("timeout"|"lost")? reason
function lock_object:acquire(timeout_ms) end

--- One attempt; never waits for the lock (a distributed lock still makes
--- one Redis round trip: blocking).
---@return boolean
function lock_object:try_acquire() end

--- Releases one hold of the calling task (a re-entrant lock needs one release
--- per acquire). false, "not_held": this task holds nothing; false, "lost":
--- the lease ran out or was taken over (lost() stays true). Blocking.
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

--- Sets the remaining lease of the calling task's hold to `ms` (> 0,
--- <= lock.max_ttl; an in-process hold gets a ttl). false, "not_held": this
--- task holds nothing; false, "lost": the hold was found gone. Blocking.
---@param ms number
---@return boolean ok
---@return ("not_held"|"lost")? reason
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

--- True once the calling task's hold is lost: the watchdog or a release
--- found it gone, or its lease ran out before it was renewed. Stays true
--- after release() reported "lost".
---@return boolean
function lock_object:lost() end

--- Sets the callback run (as a task) when a hold of this lock is found lost.
---@param fn fun(name: string, reason: string)
function lock_object:on_lost(fn) end

--- The lock name.
---@return string
function lock_object:name() end

--- A read-write lock: two lock objects sharing one name. Readers share, a
--- writer excludes everyone; a writer may take the read side (downgrade), a
--- reader asking for the write side raises.
---@class shield.rwlock
local rwlock = {}

---@class shield.distributed_rwlock: shield.rwlock

--- The shared (read) side.
---@return shield.lock_object
function rwlock:read_lock() end

--- The exclusive (write) side.
---@return shield.lock_object
function rwlock:write_lock() end

--- shield.lock(): acquire distributed locks by name and get held handles.
--- Error messages name it "shield.lock".
---@class shield.lock_manager
local lock_manager = {}

--- Waits up to `opts.wait` ms (0 = forever) and returns a held handle, or
--- nil, "timeout" (nil, "lost": a re-entry of this task's hold of name,
--- which is lost). Blocking.
---@param name string
---@param opts? shield.lock_options
---@return shield.lock_handle? handle
---@return ("timeout"|"lost")? reason
function lock_manager:acquire(name, opts) end

--- One attempt: a held handle, or nil. Blocking (one Redis round trip).
---@param name string
---@param opts? shield.lock_options
---@return shield.lock_handle?
function lock_manager:try_acquire(name, opts) end

--- In-process mutex, shared by every Lua state of the process.
---@param name string
---@param opts? shield.lock_options
---@return shield.mutex
function shield.mutex(name, opts) end

--- In-process spinlock: a short busy-wait, then the FIFO queue.
---@param name string
---@param opts? shield.lock_options
---@return shield.spinlock
function shield.spinlock(name, opts) end

--- In-process read-write lock.
---@param name string
---@param opts? shield.lock_options
---@return shield.rwlock
function shield.rwlock(name, opts) end

--- Distributed mutex (Redis, or the memory backend without Redis).
---@param name string
---@param opts? shield.lock_options
---@return shield.distributed_mutex
function shield.distributed_mutex(name, opts) end

--- Distributed read-write lock.
---@param name string
---@param opts? shield.lock_options
---@return shield.distributed_rwlock
function shield.distributed_rwlock(name, opts) end

--- The lock manager.
---@return shield.lock_manager
function shield.lock() end

-- ---------------------------------------------------------------------------
-- Leaderboards: shield.rank (docs/rank.md)
-- ---------------------------------------------------------------------------

--- Options of shield.rank(name, opts).
---@class shield.rank_options
---@field max_members? integer cap on members, 1..2^31-1 (default rank.max_members); a full board admits only a newcomer that would rank before the last member, who is then dropped
---@field ties? "reach"|"uid" order of equal scores: who reached the score first (default), or descending uid (plain Redis order)
---@field reset? "daily"|"weekly"|"monthly" archive and clear periodically (needs the scheduler); weekly on Mondays, monthly on the 1st
---@field reset_time? string "HH:MM" in UTC (default "00:00"); only with reset
---@field archive? boolean archive the top max_members before clearing (default rank.reset.enabled); only with reset
---@field distributed? boolean run the reset in one process of those that declared it (default true); only with reset

--- One entry of a board.
---@class shield.rank_entry
---@field uid string
---@field score number
---@field rank integer 1 = best

---@class shield.rank_around
---@field above shield.rank_entry[] up to n better-ranked entries, best first
---@field target shield.rank_entry
---@field below shield.rank_entry[] up to n worse-ranked entries, best first

---@class shield.rank_snapshot
---@field entries shield.rank_entry[]
---@field count integer members on the board
---@field version integer the board version the entries belong to

--- A leaderboard. Higher scores rank first. Every method is blocking on
--- Redis (one round trip). uids are non-empty strings; scores are finite
--- numbers (integers exact up to 2^53). Every write returns the board
--- version last: it grows by one with every change and never otherwise.
---@class shield.rank
local rank = {}

--- Sets uid's score. mode "max" only raises it, "min" only lowers it
--- ("set", the default, always sets). A uid not on the board is inserted.
--- Returns uid's score after the call (nil when uid was new and a full board
--- did not admit it), whether the board changed, and the version.
---@param uid string
---@param score number
---@param opts? { mode?: "set"|"max"|"min" }
---@return number? score
---@return boolean changed
---@return integer version
function rank:update(uid, score, opts) end

--- Sets many scores in one atomic step (one version), applied in uid order.
--- Returns the number of members changed and the version.
---@param scores table<string, number>
---@return integer changed
---@return integer version
function rank:mupdate(scores) end

--- Adds delta to uid's score (a new uid starts at 0). Returns the new score
--- (nil when a full board did not admit uid) and the version.
---@param uid string
---@param delta number
---@return number? score
---@return integer version
function rank:incr(uid, delta) end

--- Removes uid. Returns whether it was on the board, and the version.
---@param uid string
---@return boolean removed
---@return integer version
function rank:remove(uid) end

--- Removes every member. Returns how many, and the version.
---@return integer removed
---@return integer version
function rank:clear() end

--- Exchanges the places of a and b atomically (a takes b's score and place,
--- b takes a's; nobody else moves). With expect, only if a's and b's scores
--- are still the given ones. Returns the new scores of a and b and the
--- version; nil, "not_found" when either is absent (nobody is inserted);
--- nil, "version_conflict" when a score is not the expected one.
---@param a string
---@param b string
---@param opts? { expect: table<string, number> }
---@return number|nil score_a
---@return number|"not_found"|"version_conflict" score_b_or_reason
---@return integer? version
function rank:swap(a, b, opts) end

--- uid's rank (1 = best), or nil when uid is not on the board.
---@param uid string
---@return integer?
function rank:position(uid) end

--- uid's score, or nil when uid is not on the board.
---@param uid string
---@return number?
function rank:score(uid) end

--- The best n entries (n >= 1), best first.
---@param n integer
---@return shield.rank_entry[]
function rank:top(n) end

--- The entries ranked start..stop (1-based, inclusive, start <= stop).
---@param start integer
---@param stop integer
---@return shield.rank_entry[]
function rank:range(start, stop) end

--- The entries with min <= score <= max (bounds may be +-1/0), best first,
--- at most max_members of them.
---@param min number
---@param max number
---@return shield.rank_entry[]
function rank:range_by_score(min, max) end

--- uid's entry with up to n entries on each side, or nil, "not_found".
---@param uid string
---@param n integer
---@return shield.rank_around|nil
---@return "not_found"?
function rank:around(uid, n) end

--- The number of members.
---@return integer
function rank:count() end

--- The board version (0 for a board never written).
---@return integer
function rank:version() end

--- The entries ranked start..stop with the member count and the version
--- they belong to, read in one atomic step.
---@param start integer
---@param stop integer
---@return shield.rank_snapshot
function rank:snapshot(start, stop) end

--- The entries archived by the reset of a period: date is "YYYYMMDD" (the
--- UTC date the period began), the number YYYYMMDD (a number from 19700101
--- to 99991231 is a date, and raises unless it is a calendar date) or Unix
--- milliseconds of any moment of that day. nil, "not_found" when there is none (never archived, or expired
--- after rank.reset.archive_ttl).
---@param date string|integer
---@return shield.rank_entry[]|nil
---@return "not_found"?
function rank:archive(date) end

--- Returns a handle on the leaderboard name (no I/O without reset); handles
--- of one name share the board. With reset, registers the periodic reset
--- task "rank:<name>:reset" once per process before it returns (on a Redis
--- scheduler store a blocking call); raises without the scheduler or when
--- the registration fails (the next declaration tries again).
---@param name string
---@param opts? shield.rank_options
---@return shield.rank
function shield.rank(name, opts) end

-- ---------------------------------------------------------------------------
-- Queues (docs/queues.md)
-- ---------------------------------------------------------------------------

--- A message: nil is refused; booleans, finite numbers, strings and tables of
--- those (as shield.global():set accepts).
---@alias shield.message boolean|number|string|table

--- Options of a queue; each overrides the `queue:` config for this queue.
--- Plain, delay and priority queues take max_length and message_ttl only.
---@class shield.queue_options
---@field max_length? integer messages held; a push past it returns nil, "full"
---@field message_ttl? integer ms; undelivered messages older than this are dropped at delivery (0: never)
---@field max_retries? integer reliable/broadcast: deliveries after the first before dead-lettering
---@field retry_delay? integer reliable/broadcast: ms; consume's nack delay after an error, nack()'s default
---@field visibility_timeout? integer reliable/broadcast: ms; an unsettled delivery goes to another consumer after it
---@field dead_letter? {enabled?: boolean, max_length?: integer, ttl?: integer}

---@class shield.consume_options
---@field concurrency? integer handlers running at once, 1..10000 (default 1)

--- A running consumer (q:consume, q:subscribe). It keeps `shield run` up
--- until it stops.
---@class shield.queue_consumer
local queue_consumer = {}

--- Takes no new message and waits until the running handlers end (at most
--- timeout_ms, default 30000; their messages are then released for
--- redelivery). From one of its own handlers it returns at once. Blocking.
---@param timeout_ms? number
---@return boolean ok
---@return string? err settles that could not be sent
function queue_consumer:stop(timeout_ms) end

--- shield.queue(name): FIFO, at most once. Redis List.
---@class shield.queue
local plain_queue = {}

--- Appends msg. Blocking (Redis).
---@param msg shield.message
---@return true|nil ok
---@return "full"? reason
function plain_queue:push(msg) end

--- Appends every message, atomically: all or none.
---@param msgs shield.message[]
---@return true|nil ok
---@return "full"? reason
function plain_queue:push_batch(msgs) end

--- The oldest message; nil when empty. With timeout_ms > 0 the calling task
--- waits up to that long: nil, "timeout". Blocking.
---@param timeout_ms? number
---@return shield.message? msg
---@return "timeout"? reason
function plain_queue:pop(timeout_ms) end

---@return integer
function plain_queue:length() end

--- Drops every message; returns how many there were.
---@return integer
function plain_queue:purge() end

--- Runs fn(msg) as a task for every message, up to opts.concurrency at once.
--- An error is logged with its traceback and counted.
---@param name string consumer label
---@param fn fun(msg: shield.message)
---@param opts? shield.consume_options
---@return shield.queue_consumer
function plain_queue:consume(name, fn, opts) end

--- Ops facts of a queue (q:stats()); counts are integers. Counters (expired
--- to dead_dropped) run since the queue was created and survive purge().
---@class shield.queue_stats
---@field name string
---@field kind "plain"|"delay"|"priority"|"reliable"|"broadcast"
---@field length integer messages held (waiting, due or not, in flight, retrying); broadcast: entries retained
---@field pending integer delay queue: messages not yet due
---@field ready integer messages deliverable now
---@field in_flight integer reliable: deliveries not yet settled
---@field retrying integer nacked messages waiting for their retry
---@field consumers integer consumers (processes) seen within the liveness window
---@field local_consumers integer consumers of this queue in this process
---@field dead_letters integer dead letters held
---@field expired integer dropped at delivery after message_ttl
---@field trimmed integer broadcast entries dropped before every group acknowledged them
---@field reclaimed integer deliveries given to another consumer after a visibility timeout
---@field nacked integer nacks
---@field dead_lettered integer messages moved to the dead letters
---@field dead_dropped integer dead letters dropped
---@field groups? table<string, shield.queue_stats> broadcast queue: its groups, by name

--- Ops facts of the queue.
---@return shield.queue_stats
function plain_queue:stats() end

---@return string
function plain_queue:name() end

--- shield.delay_queue(name): messages become deliverable at a due time
--- (Redis server time); oldest due first. Redis sorted set.
---@class shield.delay_queue
local delay_queue = {}

--- Adds msg, due delay_ms from now (>= 0).
---@param msg shield.message
---@param delay_ms number
---@return true|nil ok
---@return "full"? reason
function delay_queue:push(msg, delay_ms) end

--- Adds msg, due at a Unix time in seconds (fractions allowed; the past is
--- due at once).
---@param msg shield.message
---@param unix_seconds number
---@return true|nil ok
---@return "full"? reason
function delay_queue:push_at(msg, unix_seconds) end

--- The message due longest; nil when none is due. With timeout_ms the task
--- waits (until the next due time or a push). Blocking.
---@param timeout_ms? number
---@return shield.message? msg
---@return "timeout"? reason
function delay_queue:pop(timeout_ms) end

--- Messages not yet due.
---@return integer
function delay_queue:pending() end

--- Messages due.
---@return integer
function delay_queue:ready() end

---@return integer
function delay_queue:length() end

---@return integer
function delay_queue:purge() end

---@param name string
---@param fn fun(msg: shield.message)
---@param opts? shield.consume_options
---@return shield.queue_consumer
function delay_queue:consume(name, fn, opts) end

---@return shield.queue_stats
function delay_queue:stats() end

---@return string
function delay_queue:name() end

--- shield.priority_queue(name): smallest priority first, FIFO among equals.
---@class shield.priority_queue
local priority_queue = {}

--- Adds msg with priority (any number but NaN; smaller comes first).
---@param msg shield.message
---@param priority number
---@return true|nil ok
---@return "full"? reason
function priority_queue:push(msg, priority) end

---@param timeout_ms? number
---@return shield.message? msg
---@return "timeout"? reason
function priority_queue:pop(timeout_ms) end

---@return integer
function priority_queue:length() end

---@return integer
function priority_queue:purge() end

---@param name string
---@param fn fun(msg: shield.message)
---@param opts? shield.consume_options
---@return shield.queue_consumer
function priority_queue:consume(name, fn, opts) end

---@return shield.queue_stats
function priority_queue:stats() end

---@return string
function priority_queue:name() end

--- A reliable delivery, held by the task that popped it: extended while
--- held; released for immediate redelivery when the task ends unsettled.
---@class shield.queue_handle
local queue_handle = {}

--- Settles the message. nil, "not_held" when its visibility timeout passed
--- and another delivery was made. Settling twice raises. Blocking.
---@return true|nil ok
---@return "not_held"? reason
function queue_handle:ack() end

--- Redelivers the message after delay_ms (default retry_delay); true,
--- "dead_letter" when that was its last allowed delivery (true, "dropped"
--- when dead letters are disabled: the message is gone). Blocking.
---@param delay_ms? number
---@return true|nil ok
---@return "dead_letter"|"dropped"|"not_held"|nil info
function queue_handle:nack(delay_ms) end

--- Deliveries so far, this one included.
---@return integer
function queue_handle:deliveries() end

---@return string
function queue_handle:id() end

--- A dead letter of a reliable or broadcast queue.
---@class shield.dead_letter
---@field id string
---@field message_id string
---@field message shield.message
---@field deliveries integer
---@field at integer ms
---@field group? string broadcast group

---@class shield.dead_letters
local dead_letters = {}

--- Oldest first; defaults 0, 100.
---@param start? integer
---@param count? integer
---@return shield.dead_letter[]
function dead_letters:range(start, count) end

---@return integer
function dead_letters:length() end

--- Puts dead letter id back as a new message (fresh delivery count).
---@param id string
---@return true|nil ok
---@return "not_found"|"full"|nil reason
function dead_letters:requeue(id) end

--- Moves dead letters back while the queue has room; n, "full" when some stayed.
---@return integer moved
---@return "full"? reason
function dead_letters:requeue_all() end

---@return integer
function dead_letters:purge() end

---Drops the dead letters with these ids; ids that are not dead letters count 0.
---@param id string
---@param ... string
---@return integer dropped
function dead_letters:delete(id, ...) end

--- shield.reliable_queue(name): at least once, ack / nack, retries, dead
--- letters, crash recovery. Redis Stream with a consumer group.
---@class shield.reliable_queue
local reliable_queue = {}

--- Appends msg; returns its id.
---@param msg shield.message
---@return string|nil id
---@return "full"? reason
function reliable_queue:push(msg) end

---@param msgs shield.message[]
---@return string[]|nil ids
---@return "full"? reason
function reliable_queue:push_batch(msgs) end

--- msg, handle; nil (nothing, no timeout) or nil, "timeout". Blocking.
---@param timeout_ms? number
---@return shield.message? msg
---@return shield.queue_handle|"timeout"|nil handle
function reliable_queue:pop(timeout_ms) end

--- handle:ack() for a handle of this queue (another queue's raises).
---@param handle shield.queue_handle
---@return true|nil ok
---@return "not_held"? reason
function reliable_queue:ack(handle) end

---@param handle shield.queue_handle
---@param delay_ms? number
---@return true|nil ok
---@return "dead_letter"|"dropped"|"not_held"|nil info
function reliable_queue:nack(handle, delay_ms) end

--- Messages not acknowledged yet (waiting, in flight, retrying).
---@return integer
function reliable_queue:length() end

---@return integer
function reliable_queue:purge() end

---@return shield.dead_letters
function reliable_queue:dead_letter() end

--- Success acks; an error nacks after retry_delay (logged, counted).
---@param name string
---@param fn fun(msg: shield.message)
---@param opts? shield.consume_options
---@return shield.queue_consumer
function reliable_queue:consume(name, fn, opts) end

---@return shield.queue_stats
function reliable_queue:stats() end

---@return string
function reliable_queue:name() end

--- shield.broadcast_queue(name): every subscriber group gets every message;
--- one consumer per group handles each. Redis Stream + pub/sub.
---@class shield.broadcast_queue
local broadcast_queue = {}

--- Appends msg for every group (never refused: past max_length the oldest
--- entries are trimmed, counted); returns its id.
---@param msg shield.message
---@return string id
function broadcast_queue:push(msg) end

--- fn(msg) runs as a task for every message of group (created now if new:
--- it receives messages pushed from now on). Success acks; an error nacks
--- for this group only. Blocking (until the group exists).
---@param group string
---@param fn fun(msg: shield.message)
---@param opts? shield.consume_options
---@return shield.queue_consumer
function broadcast_queue:subscribe(group, fn, opts) end

--- The same as subscribe(group, fn, opts).
---@param group string
---@param fn fun(msg: shield.message)
---@param opts? shield.consume_options
---@return shield.queue_consumer
function broadcast_queue:consume(group, fn, opts) end

--- Entries retained.
---@return integer
function broadcast_queue:length() end

---@return shield.dead_letters
function broadcast_queue:dead_letter() end

---@return shield.queue_stats
function broadcast_queue:stats() end

---@return string
function broadcast_queue:name() end

---@param name string
---@param opts? shield.queue_options
---@return shield.queue
function shield.queue(name, opts) end

---@param name string
---@param opts? shield.queue_options
---@return shield.delay_queue
function shield.delay_queue(name, opts) end

---@param name string
---@param opts? shield.queue_options
---@return shield.priority_queue
function shield.priority_queue(name, opts) end

---@param name string
---@param opts? shield.queue_options
---@return shield.reliable_queue
function shield.reliable_queue(name, opts) end

---@param name string
---@param opts? shield.queue_options
---@return shield.broadcast_queue
function shield.broadcast_queue(name, opts) end

-- ---------------------------------------------------------------------------
-- Rate limiter (docs/rate_limiter.md)
-- ---------------------------------------------------------------------------

--- Options of shield.rate_limiter. A token bucket takes `rate` (and
--- `burst`); a sliding window takes `window` and `max_requests` with
--- `sliding = true` (or `algorithm = "sliding_window"`). Without `algorithm`
--- and `sliding` the config's rate_limiter.algorithm decides. Unknown keys,
--- options of the other algorithm and impossible values raise.
---@class shield.rate_limiter_options
---@field rate? number token bucket: tokens per second, for the whole cluster on Redis; finite, > 0
---@field burst? number token bucket: capacity, >= 1; default: rate (at least 1)
---@field window? number sliding window: length in ms, >= 1
---@field max_requests? integer sliding window: requests any window may hold, >= 1
---@field sliding? boolean true: a sliding window; false: a token bucket
---@field algorithm? "token_bucket"|"sliding_window"

---@class shield.rate_limiter_stats
---@field name string
---@field algorithm "token_bucket"|"sliding_window"
---@field active integer keys with local state in this process (a Redis sliding window keeps none)
---@field allowed integer
---@field rejected integer refused as over the limit
---@field unavailable integer sliding window: refused because Redis did not answer
---@field degraded integer token bucket: decisions made while the key's share had lapsed (Redis unreachable or the sync late); also in allowed/rejected
---@field rejected_today integer rejected + unavailable since UTC midnight
---@field processes integer processes sharing the token bucket at its last sync (1 on memory)

--- A rate limiter: one per name and process (every Lua state of the process
--- gets the same one). Keys are non-empty strings; each key has its own
--- bucket or window.
---
--- Token bucket: allow, remaining and wait decide in local memory and never
--- call Redis (about 0.3 µs from Lua); on Redis each process holds a share
--- of each key's global rate and burst, reported every sync_interval.
--- Sliding window: allow and remaining are one Redis script call each
--- (blocking) on server time; exact.
---@class shield.rate_limiter
local rate_limiter = {}

--- Takes `n` (default 1, an integer >= 1) requests of `key` if they fit.
--- Token bucket: never blocks, never calls Redis. Sliding window: blocking;
--- with Redis unreachable it answers false, "unavailable".
---@param key string
---@param n? integer
---@return boolean allowed
---@return "rejected"|"unavailable"? reason
function rate_limiter:allow(key, n) end

--- How many more requests of one `key` would be allowed now: the tokens of
--- this process's bucket (token bucket), or the room left in the window
--- (sliding window: blocking; raises when Redis is unreachable).
---@param key string
---@return integer
function rate_limiter:remaining(key) end

--- Waits up to `timeout_ms` (>= 0; 0 tries once) until `n` (default 1)
--- requests of `key` are allowed, and takes them. Blocks only the calling
--- task. Token bucket: waits on local timers, never calls Redis. Sliding
--- window: retries when the window has room again; false, "unavailable" at
--- once when Redis is unreachable. Raises when `n` exceeds burst or
--- max_requests (it could never be granted). Blocking.
---@param key string
---@param timeout_ms number
---@param n? integer
---@return boolean ok
---@return "timeout"|"unavailable"? reason
function rate_limiter:wait(key, timeout_ms, n) end

--- This process's counters of the limiter.
---@return shield.rate_limiter_stats
function rate_limiter:stats() end

--- The limiter's name.
---@return string
function rate_limiter:name() end

--- The limiter called `name` (non-empty, not starting with '}'), created
--- with `opts` the first time; asking again with other options raises.
--- Nil when rate_limiter.enabled is false.
---@param name string
---@param opts shield.rate_limiter_options
---@return shield.rate_limiter
function shield.rate_limiter(name, opts) end

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
---@field last_scheduled? integer missed: the latest missed firing's scheduled time, Unix ms (scheduled is the first)

---@class shield.scheduler_task_info
---@field name string
---@field kind "cron"|"interval"|"once"
---@field schedule string
---@field timezone? string cron tasks
---@field status "active"|"paused"|"disabled"|"error"
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

--- A live view of a task: each method but name() reads the current state
--- (blocking) and returns nil, "not_found" once the task is gone.
---@class shield.scheduler_task
local scheduler_task = {}

---@return string
function scheduler_task:name() end

--- The cron text, the interval (or one-shot delay) in ms as a string, or "at:<unix s>".
---@return string
function scheduler_task:schedule() end

--- Next fire time (Unix ms), nil when none (paused, disabled; a one-shot task that ran).
---@return integer?
function scheduler_task:next_run() end

--- Start of the latest run (Unix ms), nil before the first.
---@return integer?
function scheduler_task:last_run() end

---@return integer
function scheduler_task:run_count() end

---@return "active"|"paused"|"disabled"|"error"
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

--- Disables a task: off the schedule until enable, kept registered with its
--- counters, status "disabled" (in every process, for a distributed one; stored
--- with its record, so it survives a restart on Redis). Blocking.
---@param name string
---@return true|nil ok
---@return "not_found"|nil reason
function scheduler:disable(name) end

--- Enables a disabled task from its next fire time (the disabled period is
--- not caught up); a paused task stays paused. Blocking.
---@param name string
---@return true|nil ok
---@return "not_found"|nil reason
function scheduler:enable(name) end

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
