--[[
  add_job_core.lua: storing new jobs and queueing them, shared by add_job.lua and
  add_jobs_bulk.lua so a bulk add leaves exactly the state of the same adds made one by one.
  Needs scores, events, gates, markers, enqueue, job_keys, deduplicate.

  A batch of adds shares one context, so what cannot change between two adds of one script
  call is read or written once per call instead of once per job:
  newAddBatch(keys, base, reserveIds) -> ctx
    keys = {wait, meta, id, delayed, prioritized, pc, active, events, marker}
    reserveIds = n > 0: one INCRBY n of `id` up front; the jobs then take those numbers in
    order, exactly what n INCRs would give. Only valid when every job of the call increments
    `id` (none has a parent, whose absence returns before the increment); 0 = INCR per job.
  addJob(ctx, customId, name, data, optsJson, opts, timestamp, parentKey, parentJson,
         parentDependenciesKey, repeatJobKey) -> job id (string), or -5 when the parent is gone
    `opts` is optsJson decoded (the caller decodes every job's first, so a malformed one fails
    the call before anything is written).
    - `id` is incremented for every add (also with a custom id), as BullMQ does.
    - a custom id that already exists: `duplicated` (jobId) and the existing id is returned,
      nothing is overwritten.
    - deduplication (opts `de`): see deduplicate.lua; the owner's id is returned.
    - otherwise the job hash gets name, data, opts (stored verbatim), timestamp, delay,
      priority, and parentKey/parent, rjk, deid when present; `added` (jobId, name) is
      emitted; then the id goes to `delayed` (delay > 0, event `delayed`), `prioritized`
      (priority > 0) or `wait` (LPUSH, RPUSH when opts.lifo) with event `waiting` (jobId).
  finishAddBatch(ctx)
    The deferred writes: the wait pushes (LPUSH and RPUSH touch opposite ends, so pushing all
    ids at the end gives the same list as pushing each in turn), the wait marker, and one
    approximate trim of the events stream (trimming whole head nodes once at the end removes
    the same entries as trimming after every XADD).
]]
local rcall = redis.call

-- cjson turns JSON null into a sentinel that is truthy in Lua; treat it as absent.
local function optionValue(opts, name)
  local value = opts[name]
  if value == cjson.null then
    return nil
  end
  return value
end

local function newAddBatch(keys, base, reserveIds)
  local ctx = {keys = keys, base = base, left = {}, right = {}, waitMarker = false,
    trim = false}
  if reserveIds > 0 then
    -- An `id` another client overwrote with text starts again as if absent (as incrCounter).
    local last = redis.pcall("INCRBY", keys.id, reserveIds)
    if type(last) ~= "number" then
      rcall("SET", keys.id, reserveIds)
      last = reserveIds
    end
    ctx.nextCounter = last - reserveIds + 1
  end
  return ctx
end

-- Read (and on first touch written) at the first add that gets that far, as one add would.
local function batchMaxEvents(ctx)
  local maxEvents = ctx.maxEvents
  if maxEvents == nil then
    maxEvents = getMaxEvents(ctx.keys.meta)
    ctx.maxEvents = maxEvents
  end
  return maxEvents
end

-- Neither `paused`, `concurrency` nor the active list changes while jobs are being added.
local function batchPausedOrMaxed(ctx)
  local pausedOrMaxed = ctx.pausedOrMaxed
  if pausedOrMaxed == nil then
    pausedOrMaxed = isPausedOrMaxed(ctx.keys.meta, ctx.keys.active)
    ctx.pausedOrMaxed = pausedOrMaxed
  end
  return pausedOrMaxed
end

local function nextJobCounter(ctx)
  local counter = ctx.nextCounter
  if counter ~= nil then
    ctx.nextCounter = counter + 1
    return counter
  end
  return incrCounter(ctx.keys.id)
end

local function addJob(ctx, customId, name, data, optsJson, opts, timestamp, parentKey,
                      parentJson, parentDependenciesKey, repeatJobKey)
  local keys = ctx.keys
  if parentKey ~= "" and rcall("EXISTS", parentKey) ~= 1 then
    return -5
  end
  local counter = nextJobCounter(ctx)
  local maxEvents = batchMaxEvents(ctx)

  local jobId = customId
  if jobId == "" then
    jobId = tostring(counter)
  end
  local jobKey = ctx.base .. jobId
  if customId ~= "" and rcall("EXISTS", jobKey) == 1 then
    emitEvent(keys.events, maxEvents, "duplicated", "jobId", jobId)
    return jobId
  end

  local delay = tonumber(optionValue(opts, "delay")) or 0
  local priority = tonumber(optionValue(opts, "priority")) or 0
  local de = optionValue(opts, "de")
  local deduplicationId
  if type(de) == "table" then
    local incoming = {activeKey = keys.active, name = name, data = data, opts = optsJson,
      parentKey = parentKey, parentJson = parentJson,
      parentDependenciesKey = parentDependenciesKey, repeatJobKey = repeatJobKey}
    local owner = deduplicate(de, jobId, ctx.base, keys.delayed, keys.marker, keys.events,
      maxEvents, timestamp, delay, incoming)
    if owner then
      return owner
    end
    deduplicationId = optionValue(de, "id")
  end

  if parentKey == "" and repeatJobKey == "" and deduplicationId == nil then
    -- Literal "0" spares Redis formatting the Lua number for the usual job.
    rcall("HSET", jobKey, "name", name, "data", data, "opts", optsJson, "timestamp", timestamp,
      "delay", delay == 0 and "0" or delay, "priority", priority == 0 and "0" or priority)
  else
    local fields = {"name", name, "data", data, "opts", optsJson, "timestamp", timestamp,
      "delay", delay, "priority", priority}
    if parentKey ~= "" then
      fields[#fields + 1] = "parentKey"
      fields[#fields + 1] = parentKey
      fields[#fields + 1] = "parent"
      fields[#fields + 1] = parentJson
    end
    if repeatJobKey ~= "" then
      fields[#fields + 1] = "rjk"
      fields[#fields + 1] = repeatJobKey
    end
    if deduplicationId ~= nil then
      fields[#fields + 1] = "deid"
      fields[#fields + 1] = tostring(deduplicationId)
    end
    rcall("HSET", jobKey, unpack(fields))
  end
  -- Trimmed once in finishAddBatch.
  ctx.trim = true
  rcall("XADD", keys.events, "*", "event", "added", "jobId", jobId, "name", name)

  if delay > 0 then
    local readyAt = readyAtOf(tonumber(timestamp), delay)
    pushToDelayed(keys.delayed, keys.marker, readyAt, jobId)
    emitEvent(keys.events, maxEvents, "delayed", "jobId", jobId, "delay", readyAt)
  else
    local pausedOrMaxed = batchPausedOrMaxed(ctx)
    if priority > 0 then
      pushToPrioritized(keys.prioritized, keys.pc, keys.marker, priority, pausedOrMaxed, jobId)
    else
      if optionValue(opts, "lifo") == true then
        ctx.right[#ctx.right + 1] = jobId
      else
        ctx.left[#ctx.left + 1] = jobId
      end
      if not pausedOrMaxed then
        ctx.waitMarker = true
      end
    end
    rcall("XADD", keys.events, "*", "event", "waiting", "jobId", jobId)
  end

  if parentDependenciesKey ~= "" then
    rcall("SADD", parentDependenciesKey, jobKey)
  end
  return jobId
end

-- Variadic pushes in chunks small enough for unpack.
local function pushIds(command, key, ids)
  local chunk = 4000
  for first = 1, #ids, chunk do
    rcall(command, key, unpack(ids, first, math.min(first + chunk - 1, #ids)))
  end
end

local function finishAddBatch(ctx)
  local keys = ctx.keys
  pushIds("LPUSH", keys.wait, ctx.left)
  pushIds("RPUSH", keys.wait, ctx.right)
  if ctx.waitMarker then
    addBaseMarker(keys.marker, false)
  end
  if ctx.trim then
    -- LIMIT 0: no cap on how much one trim may remove, as after each XADD of a large batch.
    rcall("XTRIM", keys.events, "MAXLEN", "~", ctx.maxEvents, "LIMIT", 0)
  end
end

-- The KEYS layout shared by add_job.lua and add_jobs_bulk.lua.
local function addJobKeys()
  return {wait = KEYS[1], meta = KEYS[2], id = KEYS[3], delayed = KEYS[4],
    prioritized = KEYS[5], pc = KEYS[6], active = KEYS[7], events = KEYS[8], marker = KEYS[9]}
end
