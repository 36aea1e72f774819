--[[
  add_to_delayed.lua: scheduling a job for later. Needs emit_event.lua.

  delayedScore(delayedKey, timestamp, delay) -> score, readyAt
    readyAt = timestamp + delay (ms). The score is readyAt * 0x1000 plus a 12-bit sequence: one
    more than the highest score already used for that millisecond (saturating at 4095), so jobs
    due in the same millisecond keep their insertion order.
  addDelayMarker(markerKey, delayedKey)
    Sets marker member "1" to the due time (ms) of the earliest delayed job, so a blocked worker
    wakes when it is due.
  pushToDelayed(delayedKey, markerKey, eventsKey, maxEvents, timestamp, delay, jobId)
    ZADD into `delayed`, emits `delayed` (jobId, delay = readyAt ms), refreshes the delay marker.
]]
local rcall = redis.call

local function delayedScore(delayedKey, timestamp, delay)
  local readyAt = tonumber(timestamp)
  if delay > 0 then
    readyAt = readyAt + delay
  end
  local lowest = readyAt * 0x1000
  local highest = lowest + 0xfff
  local last = rcall("ZREVRANGEBYSCORE", delayedKey, highest, lowest, "WITHSCORES", "LIMIT", 0, 1)
  local used = tonumber(last[2])
  if used == nil then
    return lowest, readyAt
  end
  if used >= highest then
    return highest, readyAt
  end
  return used + 1, readyAt
end

local function addDelayMarker(markerKey, delayedKey)
  local first = rcall("ZRANGE", delayedKey, 0, 0, "WITHSCORES")
  local score = tonumber(first[2])
  if score ~= nil then
    rcall("ZADD", markerKey, score / 0x1000, "1")
  end
end

local function pushToDelayed(delayedKey, markerKey, eventsKey, maxEvents, timestamp, delay, jobId)
  local score, readyAt = delayedScore(delayedKey, timestamp, delay)
  rcall("ZADD", delayedKey, score, jobId)
  emitEvent(eventsKey, maxEvents, "delayed", "jobId", jobId, "delay", readyAt)
  addDelayMarker(markerKey, delayedKey)
end
