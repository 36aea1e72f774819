--[[
  pause.lua: pauses or resumes a queue for every worker.

  KEYS: 1 wait, 2 paused (legacy list), 3 meta, 4 prioritized, 5 events, 6 delayed, 7 marker
  ARGV: 1 "paused" or "resumed", 2 "1" to emit the event, "0" not to
  Pausing sets meta `paused` and deletes the marker so blocked workers stay idle (jobs keep
  going to `wait`). Resuming clears the flag, moves jobs a pre-5 client left in the legacy
  `paused` list back to `wait` (at most 7000 per call; returns how many remain so the caller
  calls again without the event), and restores the marker: the base marker when jobs wait,
  else the delay marker for the earliest delayed job.
  Events: `paused` / `resumed` (no fields).
]]
local rcall = redis.call
local waitKey, pausedKey, metaKey = KEYS[1], KEYS[2], KEYS[3]
local prioritizedKey, eventsKey, delayedKey, markerKey = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local remaining = 0

if ARGV[1] == "paused" then
  rcall("HSET", metaKey, "paused", 1)
  rcall("DEL", markerKey)
else
  rcall("HDEL", metaKey, "paused")
  if rcall("EXISTS", pausedKey) == 1 then
    if rcall("EXISTS", waitKey) == 0 then
      rcall("RENAME", pausedKey, waitKey)
    else
      local legacy = rcall("LRANGE", pausedKey, 0, 6999)
      rcall("RPUSH", waitKey, unpack(legacy))
      rcall("LTRIM", pausedKey, #legacy, -1)
      remaining = rcall("LLEN", pausedKey)
    end
  end
  if rcall("LLEN", waitKey) + rcall("ZCARD", prioritizedKey) > 0 then
    addBaseMarker(markerKey, false)
  else
    addDelayMarker(markerKey, delayedKey)
  end
end

if ARGV[2] ~= "0" then
  emitEvent(eventsKey, getMaxEvents(metaKey), ARGV[1])
end
return remaining
