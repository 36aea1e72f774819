--[[
  get_rate_limit_ttl.lua: how long the queue stays rate limited, in ms.

  KEYS: 1 limiter, 2 meta
  ARGV: 1 max jobs ("0": not given)
  Returns, with a max (ARGV[1], else meta `max`): the limiter's PTTL when its count reached
  that max, else 0. A meta `max` that is not a number never limits. With neither: the raw
  PTTL (-2 no key, -1 no expiry).
  The one write: a limiter whose PTTL reads 0 (expiring this millisecond) is deleted, so a
  worker fetching next sees the window closed.
]]
local rcall = redis.call
local limiterKey = KEYS[1]

local function limitedTtl(maxJobs)
  if maxJobs and maxJobs <= (tonumber(rcall("GET", limiterKey)) or 0) then
    local pttl = rcall("PTTL", limiterKey)
    if pttl == 0 then
      rcall("DEL", limiterKey)
    end
    if pttl > 0 then
      return pttl
    end
  end
  return 0
end

if ARGV[1] ~= "0" then
  return limitedTtl(tonumber(ARGV[1]))
end
local metaMax = rcall("HGET", KEYS[2], "max")
if metaMax then
  return limitedTtl(tonumber(metaMax))
end
return rcall("PTTL", limiterKey)
