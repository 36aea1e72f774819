--[[
  promote_job.lua: moves a delayed job to be processed now (Node `job.promote`).

  KEYS: 1 delayed, 2 wait, 3 prioritized, 4 pc, 5 marker, 6 meta, 7 active, 8 events
  ARGV: 1 queue base (`{prefix}:{queue}:`), 2 job id
  Returns 0 moved, -3 the job is not delayed (or does not exist); nothing is written then.
  Effects: into `prioritized` when the job has a priority, else LPUSHed to the back of
  `wait` (whatever its `lifo`, as Node), waking a worker unless the queue is paused or maxed;
  the job's `delay` becomes 0.
  Event: `waiting` (jobId, prev `delayed`), appended untrimmed as Node does.
]]
local rcall = redis.call
local delayedKey, waitKey, prioritizedKey, pcKey, markerKey, metaKey, activeKey, eventsKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local jobId = ARGV[2]
local jobKey = ARGV[1] .. jobId

if rcall("ZSCORE", delayedKey, jobId) == false then
  return -3
end
local priority = tonumber(rcall("HGET", jobKey, "priority")) or 0

rcall("ZREM", delayedKey, jobId)
local blocked = isPausedOrMaxed(metaKey, activeKey)
if priority == 0 then
  pushToWait(waitKey, markerKey, false, blocked, jobId)
else
  pushToPrioritized(prioritizedKey, pcKey, markerKey, priority, blocked, jobId)
end
rcall("XADD", eventsKey, "*", "event", "waiting", "jobId", jobId, "prev", "delayed")
rcall("HSET", jobKey, "delay", 0)
return 0
