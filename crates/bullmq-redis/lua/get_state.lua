--[[
  get_state.lua: the state a job is in, checked in BullMQ's order.

  KEYS: 1 completed, 2 failed, 3 delayed, 4 active, 5 wait, 6 paused, 7 waiting-children,
        8 prioritized
  ARGV: 1 job id
  Returns completed | failed | delayed | prioritized | active | waiting | waiting-children |
  unknown.
]]
local rcall = redis.call
local jobId = ARGV[1]
if rcall("ZSCORE", KEYS[1], jobId) then return "completed" end
if rcall("ZSCORE", KEYS[2], jobId) then return "failed" end
if rcall("ZSCORE", KEYS[3], jobId) then return "delayed" end
if rcall("ZSCORE", KEYS[8], jobId) then return "prioritized" end
if rcall("LPOS", KEYS[4], jobId) then return "active" end
if rcall("LPOS", KEYS[5], jobId) then return "waiting" end
if rcall("LPOS", KEYS[6], jobId) then return "waiting" end
if rcall("ZSCORE", KEYS[7], jobId) then return "waiting-children" end
return "unknown"
