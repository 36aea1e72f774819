--[[
  Finish a batch of jobs a worker processed and, in the same call, fetch jobs for the freed slots.

  KEYS: the worker layout described in includes/worker_common.lua.
  ARGV[1] queue base
  ARGV[2] JSON { now, metricsMax, fetch = <fetch request or null> }; a fetch request with
  onlyIfFinished = true is skipped when any item was not finished (code other than 0)
  ARGV[3..] the items, flat (decoding them as JSON costs Redis more): id, token, spec, value and,
  when the spec has flag "s", stacktrace. spec is
    "kind|flags|atm|number|keepCount|keepAge|keepLimit"
  and is decoded once per distinct text (a batch repeats a few). kind is
    "completed" value (returnvalue JSON), keep*
    "failed"    value (failedReason), stacktrace (JSON), number = attempts, keep*
    "retry"     value, stacktrace; flag "l" lifo: back to wait / prioritized now (`waiting` event)
    "delay"     value?, stacktrace?, number = delay (ms); flag "k" skips the attempt: to
                `delayed` (`delayed` event)
    "limit"     number = ttl (ms): back to the front of wait, queue rate-limited for ttl ms
                (0: the limiter is left as it is, as Node's plain RateLimitError)
  flags holds "v" when value is given, "s" when stacktrace is given, plus "l" / "k" above and
  "n" when the worker knows the job has no parent (no flow bookkeeping to look up), "e" when it
  knows the job has no `deid` (no deduplication to release, see includes/worker_dedup.lua).
  atm, when not empty, is the job's attempts made after this one (completed, failed, retry,
  delay without "k"), read by the worker at fetch time: it is set rather than incremented.
  When empty it is read from the job hash, checked like every field the script computes with.
  keepCount: empty or -1 keep all, 0 delete the job, n keep the newest n; keepAge in seconds
  (empty: no age limit); keepLimit caps deletions by age per call (empty: 1000).

  Returns { codes, fetched } where codes[i] is the outcome of item i
    0 done, -1 job missing, -2 lock missing, -3 job not active, -4 job has pending children,
    -6 lock held by another worker, -9 job has failed children (Node's codes), or a string:
    the job's hash is corrupted, and it was failed with that string as failedReason instead
  (see worker_common.lua: no item raises once anything was written).
  and fetched the reply of includes/worker_fetch.lua ({ {}, 0, 0, 0, {} } when no fetch was
  asked). When an item was "limit", fetched's rateLimitTtl is at least the limiter's PTTL
  after the items (Node's moveJobFromActiveToWait returns it): the worker waits that long.
  fetched always has 9 parts, the 9th listing meta fields another client wrote that are not
  numbers BullMQ writes (includes/worker_common.lua wInvalidMeta).
]]
local req = cjson.decode(ARGV[2])
local now = tonumber(req.now)
-- Formatted once: numbers passed to redis.call are formatted with a slow "%.14g" each time.
local nowText = string.format("%d", now)
local metricsMax = tonumber(req.metricsMax) or 0
local codes = {}
local finishedAny = false
local limitedAny = false
-- Finished jobs to count into the metrics after the items.
local completedCount, failedCount = 0, 0

local function saveFailure(jobKey, value, stacktrace)
  if value then rcall("HSET", jobKey, "failedReason", value) end
  if stacktrace then rcall("HSET", jobKey, "stacktrace", stacktrace) end
end

local KINDS = { completed = true, failed = true, retry = true, delay = true, limit = true }
local specs = {}
local function specOf(text)
  local spec = specs[text]
  if spec then return spec end
  local kind, flags, atm, number, keepCount, keepAge, keepLimit =
    string.match(text, "^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$")
  if not KINDS[kind] then error("malformed finish item spec " .. text) end
  spec = {
    kind = kind, flags = {}, number = tonumber(number), attemptsMade = tonumber(atm),
    atm = atm ~= "" and atm or nil,
    keepCount = tonumber(keepCount) or -1, keepAge = tonumber(keepAge),
    keepLimit = tonumber(keepLimit) or 1000,
  }
  for i = 1, #flags do spec.flags[string.sub(flags, i, i)] = true end
  specs[text] = spec
  return spec
end

-- Jobs whose lock this call released: their locks are deleted and they leave `stalled` in one
-- DEL and one SREM after the items (before any fetch, which may lock them again).
local unlocked = {}
local unlockedKeys = {}
local released = {}

-- Finished ids waiting for one variadic ZADD (score `now`) per finished set, followed by at
-- most one trim to the newest `pendingTrims[setKey]`. Adding ids one at a time with the same
-- count trim after each leaves the same set and deletes the same jobs as adding them all and
-- trimming once, so items join the pending group while that holds; any other item flushes the
-- group first (a keep-all item after a trimming one, a different count, a trim by age).
local pendingAdds = {}
local pendingTrims = {}

local function flushAdds(setKey)
  local ids = pendingAdds[setKey]
  if not ids then return end
  pendingAdds[setKey] = nil
  local args = {}
  for i, jobId in ipairs(ids) do
    args[#args + 1] = nowText
    args[#args + 1] = jobId
    if #args >= 4000 or i == #ids then
      rcall("ZADD", setKey, unpack(args))
      args = {}
    end
  end
  local count = pendingTrims[setKey]
  if count then
    pendingTrims[setKey] = nil
    wTrimByCount(setKey, count)
  end
end

-- Adds `jobId` to the pending group of `setKey`; `trimTo` is its count trim (nil: keep all).
local function addFinished(setKey, jobId, trimTo)
  local pendingTrim = pendingTrims[setKey]
  if pendingTrim and pendingTrim ~= trimTo then flushAdds(setKey) end
  local ids = pendingAdds[setKey]
  if not ids then
    ids = {}
    pendingAdds[setKey] = ids
  end
  ids[#ids + 1] = jobId
  if trimTo then pendingTrims[setKey] = trimTo end
end


-- The checks of one item, before anything is written for it (see worker_common.lua): returns
-- the attempts made after this one as a number and as text (nil when the kind does not count
-- one), the job's parent (nil when none or not needed) and, for a job that cannot be finished
-- as asked, the reason to fail it with instead.
local function check(jobKey, spec)
  local kind, flags = spec.kind, spec.flags
  local attemptsMade, atm = nil, nil
  if kind ~= "limit" and not (kind == "delay" and flags.k) then
    attemptsMade, atm = spec.attemptsMade, spec.atm
    if not attemptsMade then
      local raw = rcall("HGET", jobKey, "atm")
      local made = wInteger(raw)
      if made == false then return nil, nil, nil, wNotInteger("atm", raw) end
      attemptsMade = (made or 0) + 1
      atm = string.format("%d", attemptsMade)
    end
  end
  if kind == "retry" or kind == "limit" then
    local raw = rcall("HGET", jobKey, "priority")
    if wInteger(raw) == false then return nil, nil, nil, wNotInteger("priority", raw) end
  end
  local parent = nil
  if (kind == "completed" or kind == "failed") and not flags.n then
    local problem
    parent, problem = wParentOf(jobKey)
    if problem then return nil, nil, nil, problem end
  end
  return attemptsMade, atm, parent, nil
end

local function finish(at, spec)
  local jobId, token, kind, flags = ARGV[at], ARGV[at + 1], spec.kind, spec.flags
  local value, stacktrace = nil, nil
  if flags.v then value = ARGV[at + 3] end
  if flags.s then stacktrace = ARGV[at + 4] end
  local jobKey = queueBase .. jobId
  local lockKey = jobKey .. ":lock"
  -- The lock first: when it holds our token the job exists (a job is never deleted while
  -- locked), so the usual case needs no EXISTS.
  -- A job listed twice in one batch: its lock is already released by the first entry.
  local current = nil
  if not released[jobId] then current = rcall("GET", lockKey) end
  if current ~= token then
    if rcall("EXISTS", jobKey) == 0 then return -1 end
    if current then return -6 end
    return -2
  end
  if kind == "completed" then
    -- Refused as Node refuses them; the worker then fails the job (see dispatch). Redis
    -- deletes empty sets, so one EXISTS of both keys answers the usual case (neither).
    local deps = jobKey .. ":dependencies"
    if rcall("EXISTS", deps, jobKey .. ":unsuccessful") > 0 then
      if rcall("EXISTS", deps) == 1 then return -4 end
      return -9
    end
  end
  local attemptsMade, atm, parent, problem = check(jobKey, spec)
  released[jobId] = true
  unlocked[#unlocked + 1] = jobId
  unlockedKeys[#unlockedKeys + 1] = lockKey
  if rcall("LREM", K.active, "-1", jobId) < 1 then return -3 end
  if problem then
    wFinalizeDeduplication(jobId, jobKey, now, nowText)
    wFailCorrupted(jobId, problem, nowText, "active")
    return problem
  end

  if kind == "completed" or kind == "failed" then
    finishedAny = true
    if not flags.e then wFinalizeDeduplication(jobId, jobKey, now, nowText) end
    local completed = kind == "completed"
    if not completed then saveFailure(jobKey, value, stacktrace) end
    -- Flows: tell the parent before this job's own state changes (as other clients order it).
    if not parent then
      -- No parent: nothing to tell.
    elseif completed then
      wChildCompleted(parent, jobKey, value, now)
    else
      wChildFailed(parent, jobKey, value, now)
    end
    local field = completed and "returnvalue" or "failedReason"
    local setKey = completed and K.completed or K.failed
    local keepCount, keepAge = spec.keepCount, spec.keepAge
    if keepCount ~= 0 then
      if keepAge then
        flushAdds(setKey)
        rcall("ZADD", setKey, nowText, jobId)
      else
        addFinished(setKey, jobId, keepCount > 0 and keepCount or nil)
      end
      rcall("HSET", jobKey, field, value, "finishedOn", nowText, "atm", atm)
      if not completed then rcall("HDEL", jobKey, "defa") end
      if keepAge then
        wTrimByAge(setKey, now, keepAge, spec.keepLimit)
        if keepCount > 0 then wTrimByCount(setKey, keepCount) end
      end
    else
      removeJobKeys(jobKey)
    end
    emit(kind, "jobId", jobId, field, value, "prev", "active")
    if not completed and attemptsMade >= (spec.number or 0) then
      emit("retries-exhausted", "jobId", jobId, "attemptsMade", attemptsMade)
    end
    if metricsMax > 0 then
      if completed then completedCount = completedCount + 1 else failedCount = failedCount + 1 end
    end
  elseif kind == "retry" then
    saveFailure(jobKey, value, stacktrace)
    local gated = queueGates(wMeta(), K.active)
    wEnqueueReady(jobId, flags.l, gated)
    rcall("HSET", jobKey, "atm", atm)
    emit("waiting", "jobId", jobId, "prev", "active")
  elseif kind == "delay" then
    saveFailure(jobKey, value, stacktrace)
    local delay = spec.number or 0
    local readyAt = readyAtOf(now, delay)
    if atm then
      rcall("HSET", jobKey, "delay", delay, "atm", atm)
    else
      rcall("HSET", jobKey, "delay", delay)
    end
    pushToDelayed(K.delayed, K.marker, readyAt, jobId)
    emit("delayed", "jobId", jobId, "delay", readyAt)
  else
    -- "limit": same effect as a Node worker's rateLimit(ttl): the limiter counter is
    -- saturated for ttl.
    -- A ttl of 0 leaves the limiter as it is (Queue.rateLimit or another worker set it).
    limitedAny = true
    if (spec.number or 0) >= 1 then
      rcall("SET", K.limiter, 9007199254740991, "PX", math.floor(spec.number))
    end
    local priority = tonumber(rcall("HGET", jobKey, "priority")) or 0
    if priority > 0 then
      -- Counter 0 puts it ahead of every job of the same priority.
      rcall("ZADD", K.prioritized, priority * 0x100000000, jobId)
    else
      local gated = queueGates(wMeta(), K.active)
      pushToWait(K.wait, K.marker, true, gated, jobId)
    end
    emit("waiting", "jobId", jobId, "prev", "active")
  end
  return 0
end

-- Every item's spec is decoded before the first write: a malformed one (a bug on our side)
-- raises while nothing has been written yet.
local starts, itemSpecs = {}, {}
local at, argc = 3, #ARGV
while at <= argc do
  local spec = specOf(ARGV[at + 2])
  starts[#starts + 1] = at
  itemSpecs[#itemSpecs + 1] = spec
  at = at + (spec.flags.s and 5 or 4)
end
if at ~= argc + 1 then error("finish items end mid-item") end
for i = 1, #starts do
  codes[i] = finish(starts[i], itemSpecs[i])
end
flushAdds(K.completed)
flushAdds(K.failed)
if completedCount > 0 then
  wCountMetrics(K.metricsCompleted, metricsMax, now, completedCount)
end
if failedCount > 0 then wCountMetrics(K.metricsFailed, metricsMax, now, failedCount) end
for first = 1, #unlocked, 2000 do
  local last = math.min(first + 1999, #unlocked)
  rcall("DEL", unpack(unlockedKeys, first, last))
  rcall("SREM", K.stalled, unpack(unlocked, first, last))
end

local fetched = { {}, 0, 0, 0, {} }
local looked = false
-- fetch.onlyIfFinished: no fetch after a refused (or corrupted) item, as Node's moveToFinished.
local allFinished = true
for i = 1, #codes do
  if codes[i] ~= 0 then allFinished = false end
end
if req.fetch ~= nil and req.fetch ~= cjson.null and tonumber(req.fetch.count) > 0
  and (allFinished or req.fetch.onlyIfFinished ~= true) then
  req.fetch.now = now
  fetched = wFetch(req.fetch)
  looked = true
end
if limitedAny then
  local pttl = rcall("PTTL", K.limiter)
  if pttl > (tonumber(fetched[2]) or 0) then fetched[2] = pttl end
end

-- `drained`: a job finished and nothing is left to run (none fetched, none waiting or active,
-- nothing delayed or rate-limited when we looked).
if finishedAny and #fetched[1] == 0
  and (not looked or (fetched[2] == 0 and fetched[3] == 0 and fetched[4] == 0))
  and rcall("LLEN", K.wait) == 0 and rcall("LLEN", K.active) == 0
  and rcall("ZCARD", K.prioritized) == 0 then
  emit("drained")
end

return { codes, wWithInvalidMeta(fetched) }
