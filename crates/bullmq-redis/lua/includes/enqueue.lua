--[[
  enqueue.lua: putting a job id where workers find it, and waking them. Needs scores.lua and
  markers.lua.

  pushToWait(waitKey, markerKey, lifo, blocked, jobId)
    LPUSH (FIFO: workers take from the right) or RPUSH (LIFO, or back to the front of the
    line) into `wait`, then the base marker unless `blocked`.
  pushToPrioritized(prioritizedKey, pcKey, markerKey, priority, blocked, jobId)
    ZADD into `prioritized` with priorityScore, then the base marker unless `blocked`.
  pushToDelayed(delayedKey, markerKey, readyAt, jobId)
    ZADD into `delayed` with delayedScore, then the delay marker. The caller emits `delayed`
    (jobId, delay = readyAt) with its own event helper.
]]
local rcall = redis.call

local function pushToWait(waitKey, markerKey, lifo, blocked, jobId)
  if lifo then
    rcall("RPUSH", waitKey, jobId)
  else
    rcall("LPUSH", waitKey, jobId)
  end
  addBaseMarker(markerKey, blocked)
end

local function pushToPrioritized(prioritizedKey, pcKey, markerKey, priority, blocked, jobId)
  rcall("ZADD", prioritizedKey, priorityScore(priority, pcKey), jobId)
  addBaseMarker(markerKey, blocked)
end

local function pushToDelayed(delayedKey, markerKey, readyAt, jobId)
  rcall("ZADD", delayedKey, delayedScore(delayedKey, readyAt), jobId)
  addDelayMarker(markerKey, delayedKey)
end
