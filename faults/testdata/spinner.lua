-- spinner.lua: a spawned task that spins after the main chunk returned
-- (issue 18, defect 1). SIGTERM must still end the process within the
-- shutdown grace + 2 s.
local c = dofile("testdata/common.lua")
shield.spawn(function()
  shield.sleep(300)
  c.emit("SPINNING")
  while true do end
end)
c.emit("READY")
