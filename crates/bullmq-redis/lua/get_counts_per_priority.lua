--[[
  get_counts_per_priority.lua: waiting jobs per priority, in one atomic read.

  KEYS: 1 wait, 2 prioritized
  ARGV: priorities (non-negative integers, checked by the caller)
  Returns one count per priority, in order: priority 0 counts the wait list; any other the
  prioritized scores of that priority, [p * 2^32, (p + 1) * 2^32 - 1].
]]
local rcall = redis.call
local counts = {}
for i = 1, #ARGV do
  local priority = tonumber(ARGV[i])
  if priority == 0 then
    counts[i] = rcall("LLEN", KEYS[1])
  else
    counts[i] = rcall("ZCOUNT", KEYS[2], priority * 0x100000000, (priority + 1) * 0x100000000 - 1)
  end
end
return counts
