--[[
  deduplicate.lua: BullMQ's `deduplication` option (opts `de`) at add time.
  Needs scores.lua, events.lua, markers.lua, enqueue.lua, job_keys.lua.

  deduplicate(de, jobId, base, delayedKey, markerKey, eventsKey, maxEvents, timestamp, delay,
              incoming)
    -> id of the job that absorbs the new one, or nil when the new job must be stored.
    `de` is the decoded opts table {id, ttl, extend, replace, reschedule, keepLastIfActive};
    the key is `{base}de:{id}` holding the id of the job currently owning the window.
    `incoming` describes the new job for keepLastIfActive: {activeKey, name, data, opts (the
    options JSON as given), parentKey, parentJson, parentDependenciesKey, repeatJobKey} ("" for
    absent parts).
    - simple mode (no ttl): the window lasts until that job finishes or is removed.
    - ttl (ms): the window expires; `extend` restarts it on every duplicate.
    - replace: while the owner is still delayed it is deleted (`removed`, prev = delayed) and
      the new job takes its place (`deduplicated` names the new job as jobId).
    - reschedule: a delayed owner is moved to the new job's due time.
    - keepLastIfActive: the key never expires (ttl ignored); a duplicate arriving while the
      owner is in `active` is kept in the hash `{base}dn:{id}` (name, data, opts, jid = its id,
      pk / pd / pdk / rjk for parent key, parent JSON, parent dependencies key, scheduler key),
      replacing an earlier one, and the key is made persistent; the worker that finishes the
      owner turns it into a job (includes/worker_dedup.lua).
    Otherwise a duplicate emits `deduplicated` (jobId = owner, deduplicationId,
    deduplicatedJobId = the dropped id) and is not stored; in replace mode only a kept
    duplicate emits it. An owner id whose job hash vanished while its key has no expiry is
    treated as stale: the new job takes the window and a kept duplicate is discarded.
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

-- keepLastIfActive: keeps the duplicate for after an active owner. Returns true when kept.
local function keepForAfterActive(key, base, ownerId, jobId, deduplicationId, incoming,
                                  eventsKey, maxEvents)
  if not ownerId or not rcall("LPOS", incoming.activeKey, ownerId) then
    return false
  end
  local nextKey = base .. "dn:" .. deduplicationId
  local fields = {"name", incoming.name, "data", incoming.data, "opts", incoming.opts,
    "jid", jobId}
  for _, part in ipairs({{"pk", incoming.parentKey}, {"pd", incoming.parentJson},
      {"pdk", incoming.parentDependenciesKey}, {"rjk", incoming.repeatJobKey}}) do
    if part[2] ~= "" then
      fields[#fields + 1] = part[1]
      fields[#fields + 1] = part[2]
    end
  end
  rcall("DEL", nextKey)
  rcall("HSET", nextKey, unpack(fields))
  -- While the owner runs, every later duplicate must find the window to be kept too.
  rcall("PERSIST", key)
  emitEvent(eventsKey, maxEvents, "deduplicated", "jobId", ownerId,
    "deduplicationId", deduplicationId, "deduplicatedJobId", jobId)
  return true
end

local function deduplicate(de, jobId, base, delayedKey, markerKey, eventsKey, maxEvents,
                           timestamp, delay, incoming)
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
  local keepLast = de["keepLastIfActive"] == true
  -- The window of keepLastIfActive never expires; the ttl still decides which path runs.
  local ownerTtl = ttl
  if keepLast then
    ownerTtl = nil
  end
  local function kept(ownerId)
    return keepLast and keepForAfterActive(key, base, ownerId, jobId, deduplicationId,
      incoming, eventsKey, maxEvents)
  end

  if de["replace"] == true then
    local ownerId = rcall("GET", key)
    if not ownerId then
      setDeduplicationOwner(key, jobId, ownerTtl)
      return nil
    end
    if rcall("ZREM", delayedKey, ownerId) > 0 then
      removeJobKeys(base .. ownerId)
      emitEvent(eventsKey, maxEvents, "removed", "jobId", ownerId, "prev", "delayed")
      emitEvent(eventsKey, maxEvents, "deduplicated", "jobId", jobId,
        "deduplicationId", deduplicationId, "deduplicatedJobId", ownerId)
      rcall("DEL", base .. "dn:" .. deduplicationId)
      if not keepLast and not extend and ttl and ttl > 0 then
        rcall("SET", key, jobId, "KEEPTTL")
      else
        setDeduplicationOwner(key, jobId, ownerTtl)
      end
      return nil
    end
    if takeStaleDeduplication(key, base, ownerId, jobId, deduplicationId, ownerTtl) then
      return nil
    end
    kept(ownerId)
    return ownerId
  end

  local ownerId
  if ttl and ttl > 0 and extend then
    ownerId = rcall("GET", key)
    if not ownerId then
      setDeduplicationOwner(key, jobId, ownerTtl)
      return nil
    end
    if takeStaleDeduplication(key, base, ownerId, jobId, deduplicationId, ownerTtl) then
      return nil
    end
    if kept(ownerId) then
      return ownerId
    end
    setDeduplicationOwner(key, ownerId, ownerTtl)
  else
    local claimed
    if ownerTtl and ownerTtl > 0 then
      claimed = rcall("SET", key, jobId, "PX", ownerTtl, "NX")
    else
      claimed = rcall("SET", key, jobId, "NX")
    end
    if claimed then
      return nil
    end
    ownerId = rcall("GET", key)
    if takeStaleDeduplication(key, base, ownerId, jobId, deduplicationId, ownerTtl) then
      return nil
    end
    if kept(ownerId) then
      return ownerId
    end
  end

  emitEvent(eventsKey, maxEvents, "deduplicated", "jobId", ownerId,
    "deduplicationId", deduplicationId, "deduplicatedJobId", jobId)
  if de["reschedule"] == true and rcall("ZSCORE", delayedKey, ownerId) then
    rcall("HSET", base .. ownerId, "delay", delay)
    local readyAt = readyAtOf(tonumber(timestamp), delay)
    pushToDelayed(delayedKey, markerKey, readyAt, ownerId)
    emitEvent(eventsKey, maxEvents, "delayed", "jobId", ownerId, "delay", readyAt)
  end
  return ownerId
end
