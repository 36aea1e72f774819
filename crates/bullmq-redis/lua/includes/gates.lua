--[[
  gates.lua: whether a job that becomes ready may wake a worker.

  queueGates(meta, activeKey) -> blocked, room
    `meta` is an HMGET reply of the queue's meta whose first two entries are `paused` and
    `concurrency` (a caller reading more fields passes its reply as is). Blocked when the queue
    is paused, or when a global concurrency is set and the active list already holds that many
    jobs; `room` is how many more may become active (nil when no global concurrency applies).
    A concurrency that is not a number is ignored, as if unset, rather than raising mid-script.
  isPausedOrMaxed(metaKey, activeKey) -> boolean
    The same gate for a caller that has not read meta: one HMGET.
  While blocked no marker is added: the job waits until resume (or a finishing job) signals the
  workers.
]]
local rcall = redis.call

local function queueGates(meta, activeKey)
  if meta[1] then return true, nil end
  local concurrency = tonumber(meta[2])
  if concurrency then
    local room = concurrency - rcall("LLEN", activeKey)
    return room <= 0, room
  end
  return false, nil
end

local function isPausedOrMaxed(metaKey, activeKey)
  return (queueGates(rcall("HMGET", metaKey, "paused", "concurrency"), activeKey))
end
