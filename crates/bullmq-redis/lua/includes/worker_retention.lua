--[[
  Retention of finished jobs (needs worker_common.lua): removeOnComplete / removeOnFail by
  count and by age, and the per-minute metrics other BullMQ clients read.
]]

-- Keeps the newest `count` ids of a finished set, deleting the rest with their hashes.
local function wTrimByCount(setKey, count)
  local excess = rcall("ZREVRANGE", setKey, count, "-1")
  if #excess > 0 then
    removeJobKeysOf(queueBase, excess)
    rcall("ZREMRANGEBYRANK", setKey, "0", -(count + 1))
  end
end

-- Deletes up to `limit` jobs finished more than `ageSecs` seconds before `now`.
local function wTrimByAge(setKey, now, ageSecs, limit)
  local cutoff = now - ageSecs * 1000
  local old = rcall("ZREVRANGEBYSCORE", setKey, cutoff, "-inf", "LIMIT", 0, limit)
  removeJobKeysOf(queueBase, old)
  for first = 1, #old, 5000 do
    rcall("ZREM", setKey, unpack(old, first, math.min(first + 4999, #old)))
  end
end

-- Counts `n` jobs finished at `now` into the metrics hash and its one-point-per-minute list.
-- Same result as counting them one at a time: only the first can close a minute.
local function wCountMetrics(metricsKey, maxPoints, now, n)
  local m = rcall("HMGET", metricsKey, "count", "prevTS", "prevCount")
  local count, prevTs, prevCount = wInteger(m[1]), wInteger(m[2]), wInteger(m[3])
  if count == false or prevTs == false or prevCount == false then
    -- Another client corrupted the counters: count afresh rather than raise after the batch
    -- was written.
    rcall("DEL", metricsKey)
    count, prevTs, prevCount = nil, nil, nil
  end
  count = count or 0
  if not prevTs then
    rcall("HSET", metricsKey, "count", count + n, "prevTS", now, "prevCount", 0)
    return
  end
  local minutes = math.min(math.floor(now / 60000) - math.floor(prevTs / 60000), maxPoints)
  if minutes <= 0 then
    rcall("HSET", metricsKey, "count", count + n)
    return
  end
  local dataKey = metricsKey .. ":data"
  rcall("LPUSH", dataKey, count - (prevCount or 0))
  -- Minutes without any finished job between the previous point and this one count as zero.
  for _ = 2, minutes do rcall("LPUSH", dataKey, 0) end
  rcall("LTRIM", dataKey, 0, maxPoints - 1)
  rcall("HSET", metricsKey, "count", count + n, "prevCount", count, "prevTS", now)
end
