--[[
  get_counts.lua: number of jobs in each requested state, in one round trip.

  KEYS: 1 queue base
  ARGV: state names: wait (also counts the legacy `paused` list), paused (legacy list only),
        active, delayed, prioritized, completed, failed, waiting-children
  Returns one count per state, in order.
]]
local rcall = redis.call
local base = KEYS[1]
local counts = {}
for i = 1, #ARGV do
  local state = ARGV[i]
  if state == "wait" then
    counts[i] = rcall("LLEN", base .. "wait") + rcall("LLEN", base .. "paused")
  elseif state == "paused" or state == "active" then
    counts[i] = rcall("LLEN", base .. state)
  else
    counts[i] = rcall("ZCARD", base .. state)
  end
end
return counts
