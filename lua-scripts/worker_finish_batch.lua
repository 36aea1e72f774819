--[[
  Finish a batch of jobs a worker processed and, in the same call, fetch jobs for the freed slots.

  KEYS: the worker layout described in includes/worker_common.lua.
  ARGV[1] queue base
  ARGV[2] JSON { now, metricsMax, fetch = <fetch request or null>, items = [...] }, each item
    { id, token, kind, ... } where kind is
      "completed" value (returnvalue JSON), keep { count, age, limit }
      "failed"    value (failedReason), stacktrace (JSON), attempts, keep
      "retry"     value, stacktrace, lifo: back to wait / prioritized now (`waiting` event)
      "delay"     value?, stacktrace?, delay (ms), skipAttempt: to `delayed` (`delayed` event)
      "limit"     ttl (ms): back to the front of wait, queue rate-limited for ttl ms
    and optional facts the worker read when it fetched the job, which spare reads here:
      atm  the job's attempts made after this one (completed / failed): set, not incremented
      np   true when the job has no parent (no flow bookkeeping to look up)

  keep.count: -1 keep all, 0 delete the job, n keep the newest n; keep.age in seconds.

  Returns { codes, fetched } where codes[i] is the outcome of items[i]
    0 done, -1 job missing, -2 lock missing, -3 job not active, -4 job has pending children,
    -6 lock held by another worker
  and fetched the reply of includes/worker_fetch.lua ({ {}, 0, 0, 0 } when no fetch was asked).
]]
local req = cjson.decode(ARGV[2])
local now = tonumber(req.now)
-- Formatted once: numbers passed to redis.call are formatted with a slow "%.14g" each time.
local nowText = string.format("%d", now)
local metricsMax = tonumber(req.metricsMax) or 0
local codes = {}
local finishedAny = false
wTrimEvents()

local function saveFailure(jobKey, item)
  if item.value ~= nil and item.value ~= cjson.null then
    rcall("HSET", jobKey, "failedReason", item.value)
  end
  if item.stacktrace ~= nil and item.stacktrace ~= cjson.null then
    rcall("HSET", jobKey, "stacktrace", item.stacktrace)
  end
end

-- Jobs whose lock this call released; removed from `stalled` in one SREM after the items.
local unlocked = {}

local function finish(item)
  local jobId = item.id
  local jobKey = queueBase .. jobId
  local lockKey = jobKey .. ":lock"
  -- The lock first: when it holds our token the job exists (a job is never deleted while
  -- locked), so the usual case needs no EXISTS.
  local current = rcall("GET", lockKey)
  if current ~= item.token then
    if rcall("EXISTS", jobKey) == 0 then return -1 end
    if current then return -6 end
    return -2
  end
  if item.kind == "completed" and rcall("SCARD", jobKey .. ":dependencies") > 0 then return -4 end
  rcall("DEL", lockKey)
  unlocked[#unlocked + 1] = jobId
  if rcall("LREM", K.active, "-1", jobId) < 1 then return -3 end

  if item.kind == "completed" or item.kind == "failed" then
    finishedAny = true
    local completed = item.kind == "completed"
    if not completed then saveFailure(jobKey, item) end
    -- Flows: tell the parent before this job's own state changes (as other clients order it).
    if item.np then
      -- No parent: nothing to tell.
    elseif completed then
      wChildCompleted(jobKey, item.value, now)
    else
      wChildFailed(jobKey, item.value, now)
    end
    local attemptsMade = tonumber(item.atm)
    if not attemptsMade then attemptsMade = rcall("HINCRBY", jobKey, "atm", 1) end
    local field = completed and "returnvalue" or "failedReason"
    local setKey = completed and K.completed or K.failed
    local keep = item.keep or {}
    local keepCount = tonumber(keep.count) or -1
    if keepCount ~= 0 then
      rcall("ZADD", setKey, nowText, jobId)
      if item.atm then
        rcall("HSET", jobKey, field, item.value, "finishedOn", nowText, "atm",
              string.format("%d", attemptsMade))
      else
        rcall("HSET", jobKey, field, item.value, "finishedOn", nowText)
      end
      if not completed then rcall("HDEL", jobKey, "defa") end
      if keep.age ~= nil and keep.age ~= cjson.null then
        wTrimByAge(setKey, now, tonumber(keep.age), tonumber(keep.limit) or 1000)
      end
      if keepCount > 0 then wTrimByCount(setKey, keepCount) end
    else
      wDeleteJob(jobId)
    end
    rcall("XADD", K.events, "*", "event", item.kind, "jobId", jobId, field, item.value,
          "prev", "active")
    if not completed and attemptsMade >= (tonumber(item.attempts) or 0) then
      rcall("XADD", K.events, "*", "event", "retries-exhausted", "jobId", jobId,
            "attemptsMade", attemptsMade)
    end
    if metricsMax > 0 then
      wCountMetric(completed and K.metricsCompleted or K.metricsFailed, metricsMax, now)
    end
  elseif item.kind == "retry" then
    saveFailure(jobKey, item)
    local gated = wQueueGates()
    wEnqueueReady(jobId, item.lifo and "RPUSH" or "LPUSH", gated)
    rcall("HINCRBY", jobKey, "atm", 1)
    rcall("XADD", K.events, "*", "event", "waiting", "jobId", jobId, "prev", "active")
  elseif item.kind == "delay" then
    saveFailure(jobKey, item)
    local delay = tonumber(item.delay) or 0
    local readyAt = now + math.max(delay, 0)
    if not item.skipAttempt then rcall("HINCRBY", jobKey, "atm", 1) end
    rcall("HSET", jobKey, "delay", delay)
    rcall("ZADD", K.delayed, wDelayedScore(readyAt), jobId)
    rcall("XADD", K.events, "*", "event", "delayed", "jobId", jobId, "delay", readyAt)
    wSignalDelayed()
  elseif item.kind == "limit" then
    -- Same effect as a Node worker's rateLimit(ttl): the limiter counter is saturated for ttl.
    rcall("SET", K.limiter, 9007199254740991, "PX", math.max(tonumber(item.ttl) or 1, 1))
    local priority = tonumber(rcall("HGET", jobKey, "priority")) or 0
    if priority > 0 then
      -- Counter 0 puts it ahead of every job of the same priority.
      rcall("ZADD", K.prioritized, priority * 0x100000000, jobId)
    else
      local gated = wQueueGates()
      rcall("RPUSH", K.wait, jobId)
      if not gated then wSignalReady() end
    end
    rcall("XADD", K.events, "*", "event", "waiting", "jobId", jobId, "prev", "active")
  else
    error("unknown finish kind " .. tostring(item.kind))
  end
  return 0
end

for i, item in ipairs(req.items) do
  codes[i] = finish(item)
end
for first = 1, #unlocked, 5000 do
  rcall("SREM", K.stalled, unpack(unlocked, first, math.min(first + 4999, #unlocked)))
end

local fetched = { {}, 0, 0, 0 }
local looked = false
if req.fetch ~= nil and req.fetch ~= cjson.null and tonumber(req.fetch.count) > 0 then
  req.fetch.now = now
  fetched = wFetch(req.fetch)
  looked = true
end

-- `drained`: a job finished and nothing is left to run (none fetched, none waiting or active,
-- nothing delayed or rate-limited when we looked).
if finishedAny and #fetched[1] == 0
  and (not looked or (fetched[2] == 0 and fetched[3] == 0 and fetched[4] == 0))
  and rcall("LLEN", K.wait) == 0 and rcall("LLEN", K.active) == 0
  and rcall("ZCARD", K.prioritized) == 0 then
  rcall("XADD", K.events, "*", "event", "drained")
end

return { codes, fetched }
