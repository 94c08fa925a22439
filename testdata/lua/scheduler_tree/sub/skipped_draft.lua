-- Left out by the recursive load test's skip pattern "*_draft.lua" (it would not load).
return { name = 42 }
