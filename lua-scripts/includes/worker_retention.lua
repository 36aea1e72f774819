--[[
  Retention of finished jobs (needs worker_common.lua): removeOnComplete / removeOnFail by
  count and by age, and the per-minute metrics other BullMQ clients read.
]]

-- Keeps the newest `count` ids of a finished set, deleting the rest with their hashes.
local function wTrimByCount(setKey, count)
  local excess = rcall("ZREVRANGE", setKey, count, "-1")
  if #excess > 0 then
    wDeleteJobs(excess)
    rcall("ZREMRANGEBYRANK", setKey, "0", -(count + 1))
  end
end

-- Deletes up to `limit` jobs finished more than `ageSecs` seconds before `now`.
local function wTrimByAge(setKey, now, ageSecs, limit)
  local cutoff = now - ageSecs * 1000
  local old = rcall("ZREVRANGEBYSCORE", setKey, cutoff, "-inf", "LIMIT", 0, limit)
  wDeleteJobs(old)
  for first = 1, #old, 5000 do
    rcall("ZREM", setKey, unpack(old, first, math.min(first + 4999, #old)))
  end
end

-- Counts `n` jobs finished at `now` into the metrics hash and its one-point-per-minute list.
-- Same result as counting them one at a time: only the first can close a minute.
local function wCountMetrics(metricsKey, maxPoints, now, n)
  local count = rcall("HINCRBY", metricsKey, "count", n) - n
  local prevTs = rcall("HGET", metricsKey, "prevTS")
  if not prevTs then
    rcall("HSET", metricsKey, "prevTS", now, "prevCount", 0)
    return
  end
  local minutes = math.min(math.floor(now / 60000) - math.floor(tonumber(prevTs) / 60000), maxPoints)
  if minutes <= 0 then return end
  local dataKey = metricsKey .. ":data"
  local delta = count - tonumber(rcall("HGET", metricsKey, "prevCount") or 0)
  rcall("LPUSH", dataKey, delta)
  -- Minutes without any finished job between the previous point and this one count as zero.
  for _ = 2, minutes do rcall("LPUSH", dataKey, 0) end
  rcall("LTRIM", dataKey, 0, maxPoints - 1)
  rcall("HSET", metricsKey, "prevCount", count, "prevTS", now)
end
