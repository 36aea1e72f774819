--[[
  add_to_wait.lua: putting a job where workers find it, and waking them.

  addBaseMarker(markerKey, pausedOrMaxed)
    Adds member "0" with score 0 to the marker zset (what idle workers BZPOPMIN on), unless the
    queue is paused or at its global concurrency.
  pushToWait(waitKey, markerKey, lifo, pausedOrMaxed, jobId)
    LPUSH (FIFO: workers take from the right) or RPUSH (LIFO) into `wait`, then the marker.
  incrCounter(key) -> number
    INCR that starts a counter another client overwrote with text again at 1, never raising.
  priorityScore(priority, pcKey) -> number
    priority * 2^32 + (INCR pc mod 2^32): lower priority first, FIFO within one priority.
  pushToPrioritized(prioritizedKey, pcKey, markerKey, priority, pausedOrMaxed, jobId)
    ZADD into `prioritized` with that score, then the marker.
]]
local rcall = redis.call

local function addBaseMarker(markerKey, pausedOrMaxed)
  if not pausedOrMaxed then
    rcall("ZADD", markerKey, 0, "0")
  end
end

local function pushToWait(waitKey, markerKey, lifo, pausedOrMaxed, jobId)
  if lifo then
    rcall("RPUSH", waitKey, jobId)
  else
    rcall("LPUSH", waitKey, jobId)
  end
  addBaseMarker(markerKey, pausedOrMaxed)
end

-- INCR that cannot raise: a counter another client overwrote with text starts again at 1 (a
-- bulk add raising half-way would leave the jobs before it written and the caller told none
-- were).
local function incrCounter(key)
  local n = redis.pcall("INCR", key)
  if type(n) == "number" then return n end
  rcall("SET", key, "1")
  return 1
end

local function priorityScore(priority, pcKey)
  local counter = incrCounter(pcKey)
  return priority * 0x100000000 + counter % 0x100000000
end

local function pushToPrioritized(prioritizedKey, pcKey, markerKey, priority, pausedOrMaxed, jobId)
  rcall("ZADD", prioritizedKey, priorityScore(priority, pcKey), jobId)
  addBaseMarker(markerKey, pausedOrMaxed)
end
