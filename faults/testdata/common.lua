-- Shared by the fault workloads (loaded with dofile): a line-oriented
-- record on stdout that faults/*.go parses. Each line is a tag and fields
-- separated by spaces.
local M = {}

function M.clean(err)
  return (tostring(err):sub(1, 300):gsub("%s+", "_"))
end

function M.emit(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  print(table.concat(parts, " "))
end

return M
