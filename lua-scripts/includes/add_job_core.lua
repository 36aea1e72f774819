--[[
  add_job_core.lua: storing one new job and queueing it, shared by add_job.lua and
  add_jobs_bulk.lua so a bulk add leaves exactly the state of the same adds made one by one.
  Needs max_events, emit_event, paused, add_to_wait, add_to_delayed, remove_job_keys,
  deduplicate.

  addJob(keys, base, customId, name, data, optsJson, timestamp, parentKey, parentJson,
         parentDependenciesKey, repeatJobKey) -> job id (string), or -5 when the parent is gone
    keys = {wait, meta, id, delayed, prioritized, pc, active, events, marker}
    - `id` is incremented for every add (also with a custom id), as BullMQ does.
    - a custom id that already exists: `duplicated` (jobId) and the existing id is returned,
      nothing is overwritten.
    - deduplication (opts `de`): see deduplicate.lua; the owner's id is returned.
    - otherwise the job hash gets name, data, opts (stored verbatim), timestamp, delay,
      priority, and parentKey/parent, rjk, deid when present; `added` (jobId, name) is
      emitted; then the id goes to `delayed` (delay > 0, event `delayed`), `prioritized`
      (priority > 0) or `wait` (LPUSH, RPUSH when opts.lifo) with event `waiting` (jobId).
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

local function addJob(keys, base, customId, name, data, optsJson, timestamp, parentKey,
                      parentJson, parentDependenciesKey, repeatJobKey)
  -- Decoded first: a malformed opts JSON raises before anything is written.
  local opts = cjson.decode(optsJson)
  if parentKey ~= "" and rcall("EXISTS", parentKey) ~= 1 then
    return -5
  end
  local counter = rcall("INCR", keys.id)
  local maxEvents = getMaxEvents(keys.meta)

  local jobId = customId
  if jobId == "" then
    jobId = tostring(counter)
  end
  local jobKey = base .. jobId
  if customId ~= "" and rcall("EXISTS", jobKey) == 1 then
    emitEvent(keys.events, maxEvents, "duplicated", "jobId", jobId)
    return jobId
  end

  local delay = tonumber(optionValue(opts, "delay")) or 0
  local priority = tonumber(optionValue(opts, "priority")) or 0
  local de = optionValue(opts, "de")
  local deduplicationId
  if type(de) == "table" then
    local owner = deduplicate(de, jobId, base, keys.delayed, keys.marker, keys.events, maxEvents,
      timestamp, delay)
    if owner then
      return owner
    end
    deduplicationId = optionValue(de, "id")
  end

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
  emitEvent(keys.events, maxEvents, "added", "jobId", jobId, "name", name)

  if delay > 0 then
    pushToDelayed(keys.delayed, keys.marker, keys.events, maxEvents, timestamp, delay, jobId)
  else
    local pausedOrMaxed = isPausedOrMaxed(keys.meta, keys.active)
    if priority > 0 then
      pushToPrioritized(keys.prioritized, keys.pc, keys.marker, priority, pausedOrMaxed, jobId)
    else
      pushToWait(keys.wait, keys.marker, optionValue(opts, "lifo") == true, pausedOrMaxed, jobId)
    end
    emitEvent(keys.events, maxEvents, "waiting", "jobId", jobId)
  end

  if parentDependenciesKey ~= "" then
    rcall("SADD", parentDependenciesKey, jobKey)
  end
  return jobId
end

-- The KEYS layout shared by add_job.lua and add_jobs_bulk.lua.
local function addJobKeys()
  return {wait = KEYS[1], meta = KEYS[2], id = KEYS[3], delayed = KEYS[4],
    prioritized = KEYS[5], pc = KEYS[6], active = KEYS[7], events = KEYS[8], marker = KEYS[9]}
end
