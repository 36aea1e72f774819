--[[
  Append one line to a job's log list, keeping at most `keepLogs` lines when given.

  KEYS: the worker layout described in includes/worker_common.lua.
  ARGV[1] queue base, ARGV[2] job id, ARGV[3] line, ARGV[4] keepLogs ("" for unlimited).
  Returns the number of log lines kept, or -1 when the job no longer exists.
]]
local jobKey = queueBase .. ARGV[2]
if rcall("EXISTS", jobKey) == 0 then return -1 end
local count = rcall("RPUSH", jobKey .. ":logs", ARGV[3])
if ARGV[4] ~= "" then
  local keep = tonumber(ARGV[4])
  rcall("LTRIM", jobKey .. ":logs", -keep, -1)
  return math.min(keep, count)
end
return count
