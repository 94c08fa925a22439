-- A task file for scheduler_spec.lua's recursive load test (one level down).
return { name = "tree_sub", expression = "hourly:30", handle = function() end }
