local shield = require("shield")
shield.spawn(function() shield.sleep(2000); print("spawn done") end)
local g = shield.global()
g:subscribe("c", function() end)
