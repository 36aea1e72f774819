--[[
  change_priority.lua: sets a job's priority (Node `job.changePriority`).

  KEYS: 1 job hash, 2 wait, 3 prioritized, 4 pc, 5 marker, 6 meta, 7 active
  ARGV: 1 job id, 2 the new priority (0 = none; validated by the caller), 3 "1" for lifo
  Returns 0 done, -1 no such job (nothing written).
  Effects: a job in `prioritized` or `wait` leaves it and is queued again: priority 0 into
  `wait` (LPUSH, or RPUSH with lifo), else into `prioritized` (after its priority's jobs, or
  with lifo ahead of them, counter 0 and no marker, as Node); a job in another state keeps its
  place. Then `priority` is stored. No event.
]]
local rcall = redis.call
local jobKey, waitKey, prioritizedKey, pcKey, markerKey, metaKey, activeKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local jobId, lifo = ARGV[1], ARGV[3] == "1"
local priority = tonumber(ARGV[2])

if rcall("EXISTS", jobKey) ~= 1 then
  return -1
end
if priority == nil then
  return -1000
end

local queued = rcall("ZREM", prioritizedKey, jobId) > 0
if not queued then queued = rcall("LREM", waitKey, -1, jobId) > 0 end
if queued then
  local blocked = isPausedOrMaxed(metaKey, activeKey)
  if priority == 0 then
    pushToWait(waitKey, markerKey, lifo, blocked, jobId)
  elseif lifo then
    rcall("ZADD", prioritizedKey, priority * 0x100000000, jobId)
  else
    pushToPrioritized(prioritizedKey, pcKey, markerKey, priority, blocked, jobId)
  end
end
rcall("HSET", jobKey, "priority", priority)
return 0
