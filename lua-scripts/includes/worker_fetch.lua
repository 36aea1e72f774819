--[[
  Moves up to `f.count` ready jobs to active for one worker (needs worker_common.lua).

  `f` is the decoded fetch request:
    count           how many free slots the worker has
    now             current time in ms
    tokenPrefix     lock tokens are tokenPrefix .. ":" .. (tokenSeq + i)
    tokenSeq        first sequence number to use
    lockDuration    lock TTL in ms
    name            worker name, stored as `pb` (processed by) when set
    limiterMax      worker rate limit (jobs per limiterDuration), 0 when none
    limiterDuration worker rate limit window in ms

  Returns { jobs, rateLimitTtl, nextDelayedAt, gated } where jobs is a flat list
  { jobId, token, HGETALL(job), jobId, token, HGETALL(job), ... }, rateLimitTtl the ms until
  the rate limiter lets jobs through again (0 when not limited) and nextDelayedAt the ready time
  of the earliest delayed job (0 when none), both only meaningful when nothing was fetched, and
  gated 1 when the queue is paused or at its global concurrency.
]]

-- Rate-limit window still closed? Returns the remaining ms, 0 when jobs may run.
local function wRateLimitTtl(maxJobs)
  if not maxJobs or maxJobs <= 0 then return 0 end
  local used = tonumber(rcall("GET", K.limiter) or 0)
  if used < maxJobs then return 0 end
  local ttl = rcall("PTTL", K.limiter)
  if ttl == 0 then rcall("DEL", K.limiter) end
  if ttl > 0 then return ttl end
  return 0
end

-- Takes the next ready job id: the wait list first (right end), then the lowest priority score.
local function wTakeNext()
  local jobId = rcall("RPOPLPUSH", K.wait, K.active)
  -- Pre-5.0 BullMQ left "0:…" marker entries in wait; drop them if we meet one.
  while jobId and string.sub(jobId, 1, 2) == "0:" do
    rcall("LREM", K.active, 1, jobId)
    jobId = rcall("RPOPLPUSH", K.wait, K.active)
  end
  if jobId then return jobId end
  local popped = rcall("ZPOPMIN", K.prioritized)
  if popped[1] then
    rcall("LPUSH", K.active, popped[1])
    return popped[1]
  end
  -- Nothing prioritized left: reset the counter as other clients do.
  rcall("DEL", K.pc)
  return nil
end

local function wFetch(f)
  local now = tonumber(f.now)
  -- Numbers handed to redis.call are formatted with "%.14g" on every call, which is slow for
  -- 13-digit timestamps: format the per-call constants once, as integers.
  local nowText = string.format("%d", now)
  local lockTtl = string.format("%d", f.lockDuration)
  local gated, room, metaMax, metaDuration = wQueueGates()
  wPromoteDelayed(now, gated)

  local maxJobs = metaMax
  if not maxJobs and f.limiterMax and f.limiterMax > 0 then maxJobs = f.limiterMax end
  local window = f.limiterDuration
  if not window or window <= 0 then window = metaDuration or 0 end

  local jobs = {}
  local limitedTtl = wRateLimitTtl(maxJobs)
  if limitedTtl > 0 then return { jobs, limitedTtl, 0, 0 } end
  if gated then return { jobs, 0, 0, 1 } end

  local want = tonumber(f.count)
  if room and room < want then want = room end

  local taken = 0
  while taken < want do
    if taken > 0 then
      limitedTtl = wRateLimitTtl(maxJobs)
      if limitedTtl > 0 then break end
    end
    local jobId = wTakeNext()
    if not jobId then break end
    taken = taken + 1
    local jobKey = queueBase .. jobId

    -- A deferred failure (`defa`) is failed right away by the worker and does not count
    -- against the rate limit.
    if maxJobs and rcall("HEXISTS", jobKey, "defa") == 0 then
      if rcall("INCR", K.limiter) == 1 then
        rcall("PEXPIRE", K.limiter, math.floor(math.abs(window)))
      end
    end

    local token = f.tokenPrefix .. ":" .. string.format("%d", f.tokenSeq + taken - 1)
    rcall("SET", jobKey .. ":lock", token, "PX", lockTtl)
    rcall("XADD", K.events, "*", "event", "active", "jobId", jobId, "prev", "waiting")
    if f.name and f.name ~= "" then
      rcall("HSET", jobKey, "processedOn", nowText, "pb", f.name)
    else
      rcall("HSET", jobKey, "processedOn", nowText)
    end
    rcall("HINCRBY", jobKey, "ats", "1")
    jobs[#jobs + 1] = jobId
    jobs[#jobs + 1] = token
    jobs[#jobs + 1] = rcall("HGETALL", jobKey)
  end

  if taken > 0 then
    -- Work left over: wake another idle worker (we may not have had room for all of it).
    if rcall("LLEN", K.wait) > 0 or rcall("ZCARD", K.prioritized) > 0 then wSignalReady() end
    return { jobs, limitedTtl, 0, 0 }
  end
  return { jobs, 0, wNextDelayedAt() or 0, 0 }
end
