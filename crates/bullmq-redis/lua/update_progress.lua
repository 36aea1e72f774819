--[[
  update_progress.lua: stores a job's progress and announces it.

  KEYS: 1 job hash, 2 events, 3 meta
  ARGV: 1 job id, 2 progress (JSON: a number or an object)
  Returns 0, or -1 when the job does not exist. Event: `progress` (jobId, data).
]]
local rcall = redis.call
if rcall("EXISTS", KEYS[1]) ~= 1 then
  return -1
end
rcall("HSET", KEYS[1], "progress", ARGV[2])
emitEvent(KEYS[2], getMaxEvents(KEYS[3]), "progress", "jobId", ARGV[1], "data", ARGV[2])
return 0
