--[[
  Renew the locks a worker holds, all in one call.

  KEYS: the worker layout described in includes/worker_common.lua.
  ARGV[1] queue base, ARGV[2] lock TTL in ms, ARGV[3..] pairs of jobId, token.

  A lock is renewed only while it still carries the worker's token; a renewed job is taken out
  of the `stalled` set so the next stalled check does not count it. Returns the ids whose lock
  could not be renewed (expired, or taken by another worker).
]]
local ttl = ARGV[2]
local lost = {}
local renewed = {}
for i = 3, #ARGV, 2 do
  local jobId, token = ARGV[i], ARGV[i + 1]
  local lockKey = queueBase .. jobId .. ":lock"
  if rcall("GET", lockKey) == token then
    rcall("SET", lockKey, token, "PX", ttl)
    renewed[#renewed + 1] = jobId
  else
    lost[#lost + 1] = jobId
  end
end
-- One SREM for the whole batch (in chunks that unpack can take).
for first = 1, #renewed, 5000 do
  rcall("SREM", K.stalled, unpack(renewed, first, math.min(first + 4999, #renewed)))
end
return lost
