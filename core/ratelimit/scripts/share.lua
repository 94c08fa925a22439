-- share.lua: one process's report for some keys of one token-bucket limiter,
-- and its new share of each key's global rate and burst (docs/rate_limiter.md).
--
-- Every key of the limiter is one global token bucket of rate R and burst B.
-- Its tokens are in the pool (this hash, field p) or in the local buckets of
-- the processes holding a lease on it. A lease gives a process a rate r
-- (tokens/s flowing into its local bucket) and a burst b (its local
-- bucket's capacity) until its deadline. Invariants:
--   sum of live leases' r <= R; the rest of R flows into the pool;
--   sum of live leases' b <= B;
--   pool + what the processes can hold <= B, where a process can hold at
--   most min(b, its level at its last report + r * time since), so no
--   more than B tokens ever exist.
-- Targets are the max-min fair share of R by the demands the processes
-- reported (rate left over when every demand is met is split equally); a
-- process's b is its target's fraction of B (less for a satisfied process
-- while others want more, see burst below). A process may only take rate
-- and burst no live lease holds: the others give theirs up when they next
-- report, and the retry hint tells the caller when that is. A first report
-- takes at most an equal share by the limiter's process count and is told
-- to report again soon: processes that start together split the burst, and
-- one alone on the key takes the rest a quarter interval later.
--
-- KEYS (all share the hash tag {name}):
--   KEYS[1]       procs: zset, process id -> heartbeat deadline (server ms)
--   KEYS[2..n+1]  one state hash per reported key:
--                   p        pool tokens
--                   t        server ms the pool was brought up to date
--                   @<pid>   a lease: "<r> <b> <demand/s> <deadline ms> <level> <at ms>"
--                            (level: the process's tokens after that report, at ms)
-- ARGV:
--   ARGV[1] process id
--   ARGV[2] rate R (tokens/s)     ARGV[3] burst B (tokens)
--   ARGV[4] sync interval (ms)    ARGV[5] lease margin (ms): a lease lasts
--           interval + margin from this call
--   ARGV[6] "1": the process is leaving (drop it from procs), else "0"
--   ARGV[7..n+6] the report of KEYS[i+1]:
--           "<wanted> <elapsed_ms> <rejects> <funded> <prov> <deg> <overflow> <flag>"
--           wanted    tokens requested since the last report (allowed or not)
--           elapsed   ms those requests were counted over
--           rejects   requests refused since the last report
--           funded    tokens in its local bucket paid for by a lease or the pool
--           prov      tokens spent before its first lease on the key (charged
--                     to the pool; what the pool lacks becomes local debt)
--           deg       tokens spent after its lease ended (charged to the pool
--                     as far as it goes, else forgiven)
--           overflow  leased tokens that found its local bucket full (back to
--                     the pool)
--           flag      "l": it drops the key (its lease ends, its funded tokens
--                     go back to the pool); "n": its first report on the key;
--                     "-": neither
-- Returns:
--   {live processes, reply_1, ..., reply_n}; reply_i = "<r> <b> <delta> <retry_ms>"
--   r, b      the new lease (0 0 after a leave)
--   delta     tokens to add to the local bucket (negative: to remove)
--   retry_ms  > 0: report this key again in that many ms

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local pid = ARGV[1]
local R, B = tonumber(ARGV[2]), tonumber(ARGV[3])
local I, M = tonumber(ARGV[4]), tonumber(ARGV[5])
local deadline = now + I + M
local field = '@' .. pid
-- A key nobody reports on: every lease ends within I+M, then the pool is
-- full after B/R more seconds, exactly like a new key.
local keyTTL = math.ceil(I + M + B / R * 1000) + 1
local tiny = 1e-9 * (R + B)

local function fmt(x) return string.format('%.17g', x) end
local function clamp(x, lo, hi) return math.max(lo, math.min(x, hi)) end

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. fmt(now))
if ARGV[6] == '1' then
  redis.call('ZREM', KEYS[1], pid)
else
  redis.call('ZADD', KEYS[1], fmt(deadline), pid)
  redis.call('PEXPIRE', KEYS[1], math.ceil(2 * (I + M)))
end
local procs = math.max(1, redis.call('ZCARD', KEYS[1]))
local out = {procs}

for i = 2, #KEYS do
  local key = KEYS[i]
  local w, el, rj, fu, pr, dg, ov, flag = string.match(ARGV[5 + i],
    '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
  local wanted, elapsed, rejects = tonumber(w), tonumber(el), tonumber(rj)
  local funded, prov, deg, overflow = tonumber(fu), tonumber(pr), tonumber(dg), tonumber(ov)

  -- The leases: the caller's own, live others', and ended ones (deadline
  -- passed: that process stopped reporting the key).
  local h = redis.call('HGETALL', key)
  local pool, tp
  local mine
  local others, sumR, sumB, held = {}, 0, 0, 0
  local ended = {}
  for j = 1, #h, 2 do
    local f, v = h[j], h[j + 1]
    if f == 'p' then
      pool = tonumber(v)
    elseif f == 't' then
      tp = tonumber(v)
    else
      local r, b, d, dl, lvl, at = string.match(v, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
      local l = {f = f, r = tonumber(r), b = tonumber(b), d = tonumber(d), dl = tonumber(dl)}
      if f == field then
        mine = l
      elseif l.dl >= now then
        others[#others + 1] = l
        sumR, sumB = sumR + l.r, sumB + l.b
        held = held + clamp(tonumber(lvl) + l.r * (now - tonumber(at)) / 1000, 0, l.b)
      else
        ended[#ended + 1] = l
      end
    end
  end
  if pool == nil or tp == nil then pool, tp = B, now end
  if mine then ended[#ended + 1] = mine end -- its old lease ends now, or ended

  -- Bring the pool up to now: the rate no lease held flowed into it (a
  -- lease holds its rate until its deadline, or until now if later).
  if now > tp then
    local add = (R - sumR) * (now - tp)
    for _, l in ipairs(ended) do
      add = add - l.r * (clamp(l.dl, tp, now) - tp)
    end
    pool = pool + add / 1000
  end
  for _, l in ipairs(ended) do
    if l ~= mine then redis.call('HDEL', key, l.f) end
  end
  pool = clamp(pool + overflow, 0, B - held - math.max(funded, 0))

  -- Tokens spent without a lease are charged to the pool.
  local covered = math.min(pool, prov)
  pool = pool - covered
  local debt = math.min(prov - covered, B)
  pool = pool - math.min(pool, deg)

  if flag == 'l' then
    pool = clamp(pool + math.max(funded, 0), 0, B - held)
    redis.call('HDEL', key, field)
    out[#out + 1] = '0 0 0 0'
  else
    -- Demand: requests per second, averaged over about one interval
    -- (weighted by the time this report covers), so a process sending now
    -- and then does not look idle between its requests.
    local demand
    if mine == nil then
      demand = wanted * 1000 / math.max(elapsed, I / 4)
    else
      local a = 1 - math.exp(-elapsed / I)
      demand = mine.d + a * (wanted * 1000 / math.max(elapsed, 1) - mine.d)
    end

    -- Targets: max-min fair share of R by demand (with a quarter more as
    -- headroom: a satisfied process's surplus overflows back to the pool,
    -- where those who want more find it); leftover split equally.
    local function want(d) return d * 1.25 end
    local ds = {want(demand)}
    for _, o in ipairs(others) do ds[#ds + 1] = want(o.d) end
    table.sort(ds)
    local rem, cnt, level = R, #ds, nil
    for _, d in ipairs(ds) do
      if d <= rem / cnt then
        rem, cnt = rem - d, cnt - 1
      else
        level = rem / cnt
        break
      end
    end
    local extra = 0
    if level == nil then extra = rem / #ds end
    local function target(d)
      if level then return math.min(want(d), level) end
      return want(d) + extra
    end
    -- The burst follows the rate, except that while some process wants
    -- more than the fair level (the global bucket would be empty), one
    -- that is satisfied keeps only an interval of its demand: the rest of
    -- its burst serves the others.
    local function burst(d, tr)
      local tb = B * tr / R
      if level and want(d) < level then tb = math.min(tb, math.max(2, tr * I / 1000)) end
      return tb
    end

    local tr = target(demand)
    local first = flag == 'n' and tr > R / procs
    if first then tr = R / procs end
    local tb = burst(demand, tr)
    local r = clamp(tr, 0, R - sumR)
    local b = clamp(tb, 0, B - sumB)

    -- Tokens: a caller that refused requests, or reports for the first
    -- time (its guess is replaced), is filled up to its burst from the
    -- pool; tokens above its new burst go back to the pool.
    local delta = 0
    if funded > b then
      delta = b - funded
      pool = pool + (funded - b)
    elseif rejects > 0 or flag == 'n' then
      delta = math.min(b - funded, pool)
      pool = pool - delta
    end
    local newLevel = funded + delta - debt
    pool = clamp(pool, 0, B - held - math.max(newLevel, 0))

    -- When to report again before the next interval: when a share the
    -- caller should get is held by a process over its target (at that
    -- process's next report), or, while the caller wants more than it
    -- has, when another lease ends unless renewed (a dead process's share
    -- is then free at once), or after a first report.
    local soon
    if first then soon = now + I / 4 end
    local blocked = r < tr - tiny or b < tb - tiny
    local wantsMore = demand > r + tiny
    for _, o in ipairs(others) do
      local ot = target(o.d)
      local at
      if blocked and (o.r > ot + tiny or o.b > burst(o.d, ot) + tiny) then
        at = o.dl - M
        if at < now then at = o.dl end
      end
      if wantsMore and o.dl < now + I and (at == nil or o.dl < at) then
        at = o.dl
      end
      if at and (soon == nil or at < soon) then soon = at end
    end
    local retry = 0
    if soon then retry = math.max(1, math.ceil(soon - now)) end

    redis.call('HSET', key, field, table.concat({fmt(r), fmt(b), fmt(demand), fmt(deadline), fmt(newLevel), fmt(now)}, ' '))
    out[#out + 1] = table.concat({fmt(r), fmt(b), fmt(delta - debt), retry}, ' ')
  end
  redis.call('HSET', key, 'p', fmt(pool), 't', fmt(now))
  redis.call('PEXPIRE', key, keyTTL)
end
return out
