--[[
  get_ranges.lua: job ids per state, by position, oldest or newest first.

  KEYS: 1 queue base
  ARGV: 1 start, 2 end (inclusive, -1 = last), 3 "1" for ascending (oldest first) or "0",
        4.. state names (wait, paused, active, delayed, prioritized, completed, failed,
        waiting-children)
  Returns one array of ids per state, already in the requested order. Lists (wait, paused,
  active) hold the newest job on the left, so ascending reads them from the right end;
  zsets are ordered by score (ZRANGE ascending, ZREVRANGE descending).
]]
local rcall = redis.call
local base = KEYS[1]
local first = tonumber(ARGV[1])
local last = tonumber(ARGV[2])
local ascending = ARGV[3] == "1"
local results = {}

local function listRange(key)
  if not ascending then
    return rcall("LRANGE", key, first, last)
  end
  -- Position p from the right is index -(p + 1); -1 ("to the end") becomes index 0.
  local from = last == -1 and 0 or -(last + 1)
  local to = first == -1 and 0 or -(first + 1)
  local ids = rcall("LRANGE", key, from, to)
  local reversed = {}
  for i = #ids, 1, -1 do
    reversed[#reversed + 1] = ids[i]
  end
  return reversed
end

for i = 4, #ARGV do
  local state = ARGV[i]
  local key = base .. state
  if state == "wait" or state == "paused" or state == "active" then
    results[#results + 1] = listRange(key)
  elseif ascending then
    results[#results + 1] = rcall("ZRANGE", key, first, last)
  else
    results[#results + 1] = rcall("ZREVRANGE", key, first, last)
  end
end
return results
