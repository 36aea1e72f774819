--[[
  markers.lua: the `marker` zset idle workers block on (BZPOPMIN). Needs scores.lua.

  addBaseMarker(markerKey, blocked)
    Member "0" with score 0 ("jobs are ready now"), unless `blocked` (queueGates).
  addDelayMarker(markerKey, delayedKey)
    Member "1" scored with the due time of the earliest delayed job (nextDelayedAt, a fraction
    when its sequence is not 0, as Node writes it), so a blocked worker wakes when it is due.
    Nothing when no job is delayed.
]]
local rcall = redis.call

local function addBaseMarker(markerKey, blocked)
  if not blocked then rcall("ZADD", markerKey, "0", "0") end
end

local function addDelayMarker(markerKey, delayedKey)
  local at = nextDelayedAt(delayedKey)
  if at ~= nil then rcall("ZADD", markerKey, at, "1") end
end
