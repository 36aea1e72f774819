--[[
  paused.lua: whether a newly waiting job may wake a worker.

  isPausedOrMaxed(metaKey, activeKey) -> boolean
    True when the queue is paused (meta `paused` present) or when a global concurrency is set in
    meta (`concurrency`) and the active list already holds that many jobs. In both cases no
    marker is added: the job waits until resume (or a finishing job) signals the workers.
]]
local rcall = redis.call

local function isPausedOrMaxed(metaKey, activeKey)
  local meta = rcall("HMGET", metaKey, "paused", "concurrency")
  if meta[1] then
    return true
  end
  if meta[2] then
    return rcall("LLEN", activeKey) >= (tonumber(meta[2]) or 0)
  end
  return false
end
