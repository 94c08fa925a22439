-- A task file for scheduler_spec.lua's recursive load test (two levels down).
return { name = "tree_deeper", expression = "every:1h", handle = function() end }
