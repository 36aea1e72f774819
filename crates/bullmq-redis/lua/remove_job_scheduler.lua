--[[
  remove_job_scheduler.lua: removes a job scheduler and its pending iteration when that is
  delayed (an iteration already waiting or running is left to finish), as Node's
  `removeJobScheduler`.

  KEYS: 1 repeat, 2 delayed, 3 events
  ARGV: 1 queue base, 2 scheduler id
  Returns 1 when the scheduler existed, 0 when not. Event `removed` (jobId, prev = delayed)
  for a removed iteration.
]]
local rcall = redis.call
local id = ARGV[2]
local millis = tonumber(rcall("ZSCORE", KEYS[1], id))
if millis then
  local jobId = "repeat:" .. id .. ":" .. string.format("%d", millis)
  if rcall("ZREM", KEYS[2], jobId) == 1 then
    removeJobKeys(ARGV[1] .. jobId)
    rcall("XADD", KEYS[3], "*", "event", "removed", "jobId", jobId, "prev", "delayed")
  end
end
if rcall("ZREM", KEYS[1], id) == 1 then
  rcall("DEL", KEYS[1] .. ":" .. id)
  return 1
end
return 0
