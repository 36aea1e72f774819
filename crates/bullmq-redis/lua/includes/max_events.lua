--[[
  max_events.lua: how long the events stream may grow, and first-touch queue metadata.

  getMaxEvents(metaKey) -> number
    Reads `opts.maxLenEvents` from the queue's meta hash. A queue whose meta has never been
    written gets the BullMQ default (10000) stored, together with `version`, so dashboards that
    require `meta.version` recognise queues created by a script before any Queue handle wrote
    its meta. An existing `version` is never overwritten (HSETNX).
]]
local rcall = redis.call

local function getMaxEvents(metaKey)
  local configured = rcall("HGET", metaKey, "opts.maxLenEvents")
  if configured then
    return tonumber(configured) or 10000
  end
  rcall("HSET", metaKey, "opts.maxLenEvents", 10000)
  rcall("HSETNX", metaKey, "version", "bullmq:6.7.0")
  return 10000
end
