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
  -- A concurrency that is not a number is ignored, as the worker scripts ignore it.
  local concurrency = tonumber(meta[2])
  if concurrency then
    return rcall("LLEN", activeKey) >= concurrency
  end
  return false
end
