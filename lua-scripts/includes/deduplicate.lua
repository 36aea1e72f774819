--[[
  deduplicate.lua: BullMQ's `deduplication` option (opts `de`) at add time.
  Needs emit_event.lua, remove_job_keys.lua, add_to_delayed.lua.

  deduplicate(de, jobId, base, delayedKey, markerKey, eventsKey, maxEvents, timestamp, delay)
    -> id of the job that absorbs the new one, or nil when the new job must be stored.
    `de` is the decoded opts table {id, ttl, extend, replace, reschedule}; the key is
    `{base}de:{id}` holding the id of the job currently owning the window.
    - simple mode (no ttl): the window lasts until that job finishes or is removed.
    - ttl (ms): the window expires; `extend` restarts it on every duplicate.
    - replace: while the owner is still delayed it is deleted (`removed`, prev = delayed) and
      the new job takes its place (`deduplicated` names the new job as jobId).
    - reschedule: a delayed owner is moved to the new job's due time.
    Otherwise a duplicate emits `deduplicated` (jobId = owner, deduplicationId,
    deduplicatedJobId = the dropped id) and is not stored. An owner id whose job hash vanished
    while its key has no expiry is treated as stale: the new job takes the window.
]]
local rcall = redis.call

local function setDeduplicationOwner(key, jobId, ttl)
  if ttl and ttl > 0 then
    rcall("SET", key, jobId, "PX", ttl)
  else
    rcall("SET", key, jobId)
  end
end

local function takeStaleDeduplication(key, base, ownerId, jobId, deduplicationId, ttl)
  if ownerId and rcall("PTTL", key) == -1 and rcall("EXISTS", base .. ownerId) == 0 then
    rcall("DEL", key, base .. "dn:" .. deduplicationId)
    setDeduplicationOwner(key, jobId, ttl)
    return true
  end
  return false
end

local function deduplicate(de, jobId, base, delayedKey, markerKey, eventsKey, maxEvents,
                           timestamp, delay)
  local deduplicationId = de["id"]
  if type(deduplicationId) ~= "string" and type(deduplicationId) ~= "number" then
    return nil
  end
  deduplicationId = tostring(deduplicationId)
  local key = base .. "de:" .. deduplicationId
  local ttl = tonumber(de["ttl"])
  if ttl then
    ttl = math.floor(ttl)
  end
  local extend = de["extend"] == true

  if de["replace"] == true then
    local ownerId = rcall("GET", key)
    if not ownerId then
      setDeduplicationOwner(key, jobId, ttl)
      return nil
    end
    if rcall("ZREM", delayedKey, ownerId) > 0 then
      removeJobKeys(base .. ownerId)
      emitEvent(eventsKey, maxEvents, "removed", "jobId", ownerId, "prev", "delayed")
      emitEvent(eventsKey, maxEvents, "deduplicated", "jobId", jobId,
        "deduplicationId", deduplicationId, "deduplicatedJobId", ownerId)
      rcall("DEL", base .. "dn:" .. deduplicationId)
      if not extend and ttl and ttl > 0 then
        rcall("SET", key, jobId, "KEEPTTL")
      else
        setDeduplicationOwner(key, jobId, ttl)
      end
      return nil
    end
    if takeStaleDeduplication(key, base, ownerId, jobId, deduplicationId, ttl) then
      return nil
    end
    return ownerId
  end

  local ownerId
  if ttl and ttl > 0 and extend then
    ownerId = rcall("GET", key)
    if not ownerId then
      setDeduplicationOwner(key, jobId, ttl)
      return nil
    end
    if takeStaleDeduplication(key, base, ownerId, jobId, deduplicationId, ttl) then
      return nil
    end
    setDeduplicationOwner(key, ownerId, ttl)
  else
    local claimed
    if ttl and ttl > 0 then
      claimed = rcall("SET", key, jobId, "PX", ttl, "NX")
    else
      claimed = rcall("SET", key, jobId, "NX")
    end
    if claimed then
      return nil
    end
    ownerId = rcall("GET", key)
    if takeStaleDeduplication(key, base, ownerId, jobId, deduplicationId, ttl) then
      return nil
    end
  end

  emitEvent(eventsKey, maxEvents, "deduplicated", "jobId", ownerId,
    "deduplicationId", deduplicationId, "deduplicatedJobId", jobId)
  if de["reschedule"] == true and rcall("ZSCORE", delayedKey, ownerId) then
    rcall("HSET", base .. ownerId, "delay", delay)
    pushToDelayed(delayedKey, markerKey, eventsKey, maxEvents, timestamp, delay, ownerId)
  end
  return ownerId
end
