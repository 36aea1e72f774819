--[[
  Replace a job's data while it is being processed.

  KEYS: the worker layout described in includes/worker_common.lua.
  ARGV[1] queue base, ARGV[2] job id, ARGV[3] data (JSON).
  Returns 0, or -1 when the job no longer exists.
]]
local jobKey = queueBase .. ARGV[2]
if rcall("EXISTS", jobKey) == 0 then return -1 end
rcall("HSET", jobKey, "data", ARGV[3])
return 0
