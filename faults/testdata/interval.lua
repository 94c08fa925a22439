-- interval.lua EVERY_MS LOCK_TTL_MS: registers the distributed interval task
-- "faults" and stays up (the harness ends it with SIGTERM).
-- FIRE scheduled_ms attempt recovered at_ms   one run of a firing
local c = dofile("testdata/common.lua")
local every, ttl = tonumber(arg[1]), tonumber(arg[2])
shield.scheduler():interval("faults", every, function(info)
  c.emit("FIRE", info.scheduled, info.attempt, info.recovered, shield.now_ms())
end, { distributed = true, lock_ttl = ttl, overlap = "skip" })
c.emit("READY")
