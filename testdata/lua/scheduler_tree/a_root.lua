-- A task file for scheduler_spec.lua's recursive load test.
return { name = "tree_root", expression = "daily:03:00", handle = function() end }
