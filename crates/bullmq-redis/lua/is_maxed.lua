--[[
  is_maxed.lua: whether the queue's global concurrency is reached.

  KEYS: 1 meta, 2 active
  ARGV: none
  Returns 1 when meta `concurrency` is set and the active list holds at least that many jobs,
  else 0. A `concurrency` that is not a number reads as unset (as includes/gates.lua does)
  instead of raising.
]]
local concurrency = tonumber(redis.call("HGET", KEYS[1], "concurrency"))
if concurrency and redis.call("LLEN", KEYS[2]) >= concurrency then
  return 1
end
return 0
