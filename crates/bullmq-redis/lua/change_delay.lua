--[[
  change_delay.lua: reschedules a delayed job (Node `job.changeDelay`).

  KEYS: 1 job hash, 2 delayed, 3 marker, 4 meta, 5 events
  ARGV: 1 job id, 2 the new delay (ms from ARGV[3]), 3 now (ms, the caller's clock as Node's)
  Returns 0 done, -1 no such job, -3 the job is not delayed (nothing written on a refusal).
  Effects: `delay` stored, the job rescored to be due at now + delay, the delay marker reset.
  Event: `delayed` (jobId, delay = the due time in ms).
]]
local rcall = redis.call
local jobKey, delayedKey, markerKey, metaKey, eventsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local jobId = ARGV[1]
local delay, now = tonumber(ARGV[2]), tonumber(ARGV[3])

if rcall("EXISTS", jobKey) ~= 1 then
  return -1
end
if rcall("ZSCORE", delayedKey, jobId) == false then
  return -3
end
if delay == nil or now == nil then
  return -1000
end
local readyAt = now + delay

rcall("ZREM", delayedKey, jobId)
rcall("HSET", jobKey, "delay", delay)
rcall("ZADD", delayedKey, delayedScore(delayedKey, readyAt), jobId)
emitEvent(eventsKey, getMaxEvents(metaKey), "delayed", "jobId", jobId, "delay", readyAt)
addDelayMarker(markerKey, delayedKey)
return 0
