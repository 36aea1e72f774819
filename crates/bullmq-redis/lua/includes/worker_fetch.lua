--[[
  Moves up to `f.count` ready jobs to active for one worker (needs worker_common.lua,
  worker_dedup.lua, scheduler_store.lua and scheduler_next.lua).

  `f` is the decoded fetch request:
    count           how many free slots the worker has
    now             current time in ms
    tokenPrefix     lock tokens are tokenPrefix .. ":" .. (tokenSeq + i)
    tokenSeq        first sequence number to use
    token           (optional) the caller's exact lock token, used for every job instead of
                    tokenPrefix .. ":" .. seq (Node's getNextJob(token))
    lockDuration    lock TTL in ms
    name            worker name, stored as `pb` (processed by) when set
    limiterMax      worker rate limit (jobs per limiterDuration), 0 when none
    limiterDuration worker rate limit window in ms

  Returns { jobs, rateLimitTtl, nextDelayedAt, gated, hashes, failed, dropped, iterations }
  where jobs lists
  the ids moved to active, in order; the i-th job's lock token is
  tokenPrefix .. ":" .. (tokenSeq + i - 1). failed lists (flat id, reason) the jobs taken from
  wait that this call failed because their hash is corrupted (see worker_common.lua), dropped
  the ids taken from wait that had no job hash at all (they are no longer in any list).
  hashes is either empty or, when the call fetched at most WFETCH_INLINE_MAX jobs, holds one
  flat HGETALL reply per job (hashes[i] is jobs[i]'s hash, read after the updates below). For
  larger fetches (10 000 free slots at once) the caller reads the hashes with pipelined
  HGETALLs outside the script, which bounds the reply and the Lua memory of one call. rateLimitTtl is the ms until the rate limiter lets jobs
  through again (0 when not limited) and nextDelayedAt the ready time of the earliest delayed
  job (0 when none), both only meaningful when nothing was fetched, and gated 1 when the queue
  is paused or at its global concurrency. iterations is flat (i, code, next job id or "") for
  the fetched iterations of `every` job schedulers whose next iteration this call created or
  decided on, as the job's start does in Node's Worker (codes of nextIteration in
  scheduler_next.lua, and 4 when the series ended); the worker asks for the others (cron
  schedulers, whose runs need the tz database) in a call of its own.
]]

-- Fetches of at most this many jobs return the job hashes in the reply (see above). Copying a
-- hash through Lua costs Redis ~1 us per job more than a pipelined HGETALL, but the second
-- round trip it spares is what bounds a worker's cycle: 1 worker x 100 no-op jobs measured
-- ~68k jobs/s with 8 (11.4 Redis us/job) and ~79k with 40 or more (12.2-12.6 us/job), and
-- client CPU fell by a quarter (one reply to decode instead of a pipeline of HGETALLs).
local WFETCH_INLINE_MAX = 100

-- Rate-limit window still closed? Returns the remaining ms, 0 when jobs may run.
local function wRateLimitTtl(maxJobs)
  if not maxJobs or maxJobs <= 0 then return 0 end
  -- A counter another client corrupted counts as empty rather than raising.
  local used = tonumber(rcall("GET", K.limiter)) or 0
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

-- LPUSH of ids to active, in chunks that unpack can take (Lua's stack holds ~8000 values; a
-- worker with 10 000 free slots fetches more than that at once). Same order as one LPUSH.
local function wPushActive(ids)
  for first = 1, #ids, 5000 do
    rcall("LPUSH", K.active, unpack(ids, first, math.min(first + 4999, #ids)))
  end
end

-- Moves up to `want` ids from the wait list to active, in the order RPOPLPUSH one at a time
-- would take them (the right end first), appending them to `out`. Returns how many were taken
-- and whether ids are left in wait (nil when not known). One job takes one RPOPLPUSH; more take
-- a few variadic calls, reading one id beyond the ones taken to learn whether any are left
-- (which saves the caller an LLEN).
local function wTakeFromWait(want, out)
  if want == 1 then
    local jobId = rcall("RPOPLPUSH", K.wait, K.active)
    -- Pre-5.0 BullMQ left "0:…" marker entries in wait; they are dropped.
    while jobId and string.sub(jobId, 1, 2) == "0:" do
      rcall("LREM", K.active, 1, jobId)
      jobId = rcall("RPOPLPUSH", K.wait, K.active)
    end
    if not jobId then return 0, false end
    out[#out + 1] = jobId
    return 1, nil
  end
  local taken = 0
  while taken < want do
    local need = want - taken
    local ids = rcall("LRANGE", K.wait, -(need + 1), "-1")
    local n = #ids
    if n == 0 then return taken, false end
    local first = 1
    if n > need then first = 2 end
    rcall("LTRIM", K.wait, "0", -(n - first + 2))
    local moved = {}
    for i = n, first, -1 do
      local jobId = ids[i]
      -- Pre-5.0 BullMQ left "0:…" marker entries in wait; they are dropped.
      if string.sub(jobId, 1, 2) ~= "0:" then
        moved[#moved + 1] = jobId
        out[#out + 1] = jobId
      end
    end
    wPushActive(moved)
    taken = taken + #moved
    if n <= need then return taken, false end
  end
  return taken, true
end

-- Moves up to `want` ids from the prioritized zset (lowest score first) to active. Returns how
-- many were taken and false when none are left (nil when not known).
local function wTakeFromPrioritized(want, out)
  local popped = rcall("ZPOPMIN", K.prioritized, want)
  local moved = {}
  for i = 1, #popped, 2 do moved[#moved + 1] = popped[i] end
  if #moved > 0 then
    wPushActive(moved)
    for _, jobId in ipairs(moved) do out[#out + 1] = jobId end
  end
  -- Nothing prioritized left: reset the counter as other clients do.
  if #moved < want then
    rcall("DEL", K.pc)
    return #moved, false
  end
  return #moved, nil
end

-- The keys of the scheduler helpers, from the worker layout.
local function wSchedulerKeys()
  return {repeatKey = K.repeatKey, delayed = K.delayed, wait = K.wait, meta = K.meta,
    prioritized = K.prioritized, marker = K.marker, id = queueBase .. "id", events = K.events,
    pc = K.pc, active = K.active}
end

-- The next iteration of the fetched iteration `jobId` of `every` scheduler `id`: code and next
-- id, or nil when the worker is to plan it (cron, options that are not a plain `every`
-- schedule, an id with a colon that may be a BullMQ 5 key).
local function wNextIteration(jobId, id, optsJson, now)
  if not optsJson or string.find(id, ":", 1, true) then return nil end
  local decoded, opts = pcall(cjson.decode, optsJson)
  if not decoded or type(opts) ~= "table" then return nil end
  local nextOpts = everyIterationOpts(id, opts, now)
  if nextOpts == nil then return nil end
  if nextOpts == "ended" then return 4 end
  return nextIteration(wSchedulerKeys(), queueBase, id, jobId, nil, nextOpts, now, false)
end

local function wFetch(f)
  local now = tonumber(f.now)
  -- Numbers handed to redis.call are formatted with "%.14g" on every call, which is slow for
  -- 13-digit timestamps: format the per-call constants once, as integers.
  local nowText = string.format("%d", now)
  local lockTtl = string.format("%d", f.lockDuration)
  local meta = wMeta()
  local gated, room = queueGates(meta, K.active)
  local metaMax, metaDuration = tonumber(meta[3]), tonumber(meta[4])
  -- A duration PEXPIRE cannot take ("1e400", 20 digits) counts as absent.
  if metaDuration and not (math.abs(metaDuration) < 2^53) then metaDuration = nil end
  wPromoteDelayed(now, gated)

  -- As Node: a meta `max` that is present overrides the worker's limiter, and one that is
  -- not a number limits nothing.
  local maxJobs = metaMax
  if not meta[3] and f.limiterMax and f.limiterMax > 0 then maxJobs = f.limiterMax end
  local window = f.limiterDuration
  if not window or window <= 0 then window = metaDuration or 0 end

  local jobs = {}
  -- Corrupted jobs failed by this call (flat id, reason) and ids without a job hash.
  local failed, dropped = {}, {}
  local limitedTtl = wRateLimitTtl(maxJobs)
  if limitedTtl > 0 then return { jobs, limitedTtl, 0, 0, {}, failed, dropped } end
  if gated then return { jobs, 0, 0, 1, {}, failed, dropped } end

  local want = tonumber(f.count)
  if room and room < want then want = room end

  local ids = {}
  -- Whether ids are left in wait / prioritized after taking ours: nil when not known.
  local waitLeft, prioritizedLeft = nil, nil
  if maxJobs then
    -- Rate limited: one job at a time, each counted against the limiter before the next.
    while #ids < want do
      if #ids > 0 then
        limitedTtl = wRateLimitTtl(maxJobs)
        if limitedTtl > 0 then break end
      end
      local jobId = wTakeNext()
      if not jobId then break end
      ids[#ids + 1] = jobId
      -- A deferred failure (`defa`) is failed right away by the worker and does not count
      -- against the rate limit.
      if rcall("HEXISTS", queueBase .. jobId, "defa") == 0 then
        if incrCounter(K.limiter) == 1 then
          rcall("PEXPIRE", K.limiter, math.floor(math.abs(window)))
        end
      end
    end
  elseif want > 0 then
    local taken
    taken, waitLeft = wTakeFromWait(want, ids)
    if taken < want then
      local _
      _, prioritizedLeft = wTakeFromPrioritized(want - taken, ids)
    end
  end

  local name = f.name
  if name == "" then name = nil end
  local tokenPrefix = f.tokenPrefix .. ":"
  local tokenSeq = f.tokenSeq
  local exactToken = f.token
  if type(exactToken) ~= "string" or exactToken == "" then exactToken = nil end
  local hashes = {}
  local iterations = {}
  local inline = #ids <= WFETCH_INLINE_MAX
  for _, jobId in ipairs(ids) do
    local jobKey = queueBase .. jobId
    -- Checked before anything is written for the job (see worker_common.lua): a corrupted job
    -- is failed on its own and the others are fetched as usual. problem false: no hash at all.
    local problem, hash, ats = nil, nil, nil
    local atsAt, processedAt, pbAt = nil, nil, nil
    -- A job scheduler's iteration (`rjk`) and its options, to create the next iteration.
    local schedulerId, optsJson = nil, nil
    if string.find(jobId, "[\128-\255]") and not wIsUtf8(jobId) then
      problem = "corrupted job id: not valid UTF-8"
    elseif inline then
      -- The hash is returned anyway: read it first, and write the new attempt count with the
      -- other fields (one HSET instead of HSET + HINCRBY), then update the copy we return.
      hash = rcall("HGETALL", jobKey)
      if #hash == 0 then
        problem = false
      else
        for j = 1, #hash, 2 do
          local field = hash[j]
          if field == "ats" then
            atsAt = j + 1
          elseif field == "processedOn" then
            processedAt = j + 1
          elseif field == "pb" then
            pbAt = j + 1
          elseif field == "rjk" then
            schedulerId = hash[j + 1]
          elseif field == "opts" then
            optsJson = hash[j + 1]
          end
        end
        ats = atsAt and hash[atsAt]
      end
    else
      -- Larger fetches leave the hashes to the caller: read only what is used here.
      local v = rcall("HMGET", jobKey, "ats", "name", "rjk")
      if not v[2] and rcall("EXISTS", jobKey) == 0 then
        problem = false
      else
        ats = v[1]
        if v[3] then
          schedulerId = v[3]
          optsJson = rcall("HGET", jobKey, "opts")
        end
      end
    end
    -- The one field this script computes with. The worker checks every other field when it
    -- decodes the hash, and fails a job it cannot decode through the finish script.
    local started = 0
    if ats and ats ~= "" then
      local n = tonumber(ats)
      if n and n - n == 0 then started = math.floor(n) else problem = wNotInteger("ats", ats) end
    end
    if problem == false then
      -- An id without a job hash: there is no job to run or to fail. It leaves active and is
      -- reported to the worker.
      rcall("LREM", K.active, 1, jobId)
      dropped[#dropped + 1] = jobId
    elseif problem then
      rcall("LREM", K.active, 1, jobId)
      wFinalizeDeduplication(jobId, jobKey, now, nowText)
      wFailCorrupted(jobId, problem, nowText, "waiting")
      failed[#failed + 1] = jobId
      failed[#failed + 1] = problem
    else
      local n = #jobs + 1
      local token = exactToken or (tokenPrefix .. string.format("%d", tokenSeq + n - 1))
      rcall("SET", jobKey .. ":lock", token, "PX", lockTtl)
      emit("active", "jobId", jobId, "prev", "waiting")
      ats = string.format("%d", started + 1)
      if name then
        rcall("HSET", jobKey, "processedOn", nowText, "ats", ats, "pb", name)
      else
        rcall("HSET", jobKey, "processedOn", nowText, "ats", ats)
      end
      if inline then
        if not processedAt then
          processedAt = #hash + 2
          hash[processedAt - 1] = "processedOn"
        end
        hash[processedAt] = nowText
        if not atsAt then
          atsAt = #hash + 2
          hash[atsAt - 1] = "ats"
        end
        hash[atsAt] = ats
        if name then
          if not pbAt then
            pbAt = #hash + 2
            hash[pbAt - 1] = "pb"
          end
          hash[pbAt] = name
        end
        hashes[n] = hash
      end
      jobs[n] = jobId
      if schedulerId and schedulerId ~= "" then
        local code, nextId = wNextIteration(jobId, schedulerId, optsJson, now)
        if code then
          iterations[#iterations + 1] = n
          iterations[#iterations + 1] = code
          iterations[#iterations + 1] = nextId or ""
        end
      end
    end
  end

  if #ids > 0 then
    -- Work left over: wake another idle worker (we may not have had room for all of it). When
    -- we do not know whether wait has more (one job taken), the marker is set without looking,
    -- as Node's worker does after every fetch: an idle worker woken for nothing only finds the
    -- queue empty and blocks again, and the look would cost every call a command.
    if waitLeft == nil then waitLeft = true end
    if not waitLeft and prioritizedLeft == nil then
      prioritizedLeft = rcall("ZCARD", K.prioritized) > 0
    end
    if waitLeft or prioritizedLeft then addBaseMarker(K.marker, false) end
  end
  if #jobs > 0 then return { jobs, limitedTtl, 0, 0, hashes, failed, dropped, iterations } end
  return { jobs, 0, math.floor(nextDelayedAt(K.delayed) or 0), 0, {}, failed, dropped }
end
