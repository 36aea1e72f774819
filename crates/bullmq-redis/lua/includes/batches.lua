--[[
  batches.lua: commands with very many arguments, split so `unpack` stays within Lua's limits.

  forEachBatch(items, size, fn)
    Calls fn(from, to) for consecutive index ranges of at most `size` items.
  zremAll(key, ids)
    ZREM every id from a zset, 5000 per command.
]]
local rcall = redis.call

local function forEachBatch(items, size, fn)
  for from = 1, #items, size do
    fn(from, math.min(from + size - 1, #items))
  end
end

local function zremAll(key, ids)
  forEachBatch(ids, 5000, function(from, to)
    rcall("ZREM", key, unpack(ids, from, to))
  end)
end
