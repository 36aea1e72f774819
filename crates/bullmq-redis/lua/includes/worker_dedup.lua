--[[
  Deduplication when a worker finishes a job for good (needs worker_common.lua).

  wFinalizeDeduplication(jobId, jobKey, now, nowText)
    Called for a job that completed or failed for good, after its lock and active checks and
    before it is added to `completed` / `failed` (or deleted), as other BullMQ clients do it;
    `now` is the finish time in ms and `nowText` the same as integer text.
    Jobs without a `deid` field are left alone. For a job with one:
    - the window `de:{deid}` is released when it has no expiry and still names this job
      (simple mode, and keepLastIfActive, whose key never expires); a key with a ttl lives its
      ttl out (ttl, extend);
    - when `dn:{deid}` holds the payload of a duplicate added while this job was active
      (keepLastIfActive), that payload becomes a new job: the queue's `id` counter is always
      incremented, the job takes the duplicate's id (`jid`, falling back to the counter when
      `jid` is missing or a job with that id exists), becomes the window's owner (no expiry
      with keepLastIfActive, else the payload's ttl), is stored with the finish time as its
      `timestamp` and queued by its own options (delayed, prioritized, wait; `lifo`) with
      `added` then `delayed` or `waiting`; then `dn:` is deleted.

  Never raises: this runs after the batch has written. Payload fields are checked first;
  options that are not a JSON object (or numbers Redis cannot take: not finite, beyond 2^53)
  count as absent, so the job is queued with default options and the text is kept
  verbatim (the fetch that takes the job reports it as corrupted, as for any job); a payload
  that cannot be stored (its key holds another type, no usable id) is left in `dn:` untouched.
]]

-- cjson turns JSON null into a sentinel that is truthy in Lua; treat it as absent.
local function wPresent(value)
  if value == nil or value == cjson.null then return nil end
  return value
end

-- A payload option as a number Redis accepts: finite and within +-2^53, else nil (as absent).
local function wNumber(value)
  local number = tonumber(wPresent(value))
  if number and number == number and math.abs(number) <= 9007199254740992 then
    return number
  end
  return nil
end

local function wReleaseDeduplication(jobId, deduplicationKey)
  local pttl = rcall("PTTL", deduplicationKey)
  if pttl == 0 then
    rcall("DEL", deduplicationKey)
  elseif pttl == -1 then
    -- pcall: a key of another type (GET raises WRONGTYPE) is not this job's window.
    local owner = redis.pcall("GET", deduplicationKey)
    if owner == jobId then rcall("DEL", deduplicationKey) end
  end
end

-- The options of a stored payload, decoded without raising: a table, or {} when not JSON / not
-- an object.
local function wPayloadOptions(text)
  if type(text) ~= "string" then return {} end
  local ok, opts = pcall(cjson.decode, text)
  if ok and type(opts) == "table" then return opts end
  return {}
end

local function wRequeueDeduplicated(deduplicationId, deduplicationKey, now, nowText)
  local nextKey = queueBase .. "dn:" .. deduplicationId
  -- TYPE rather than EXISTS: HMGET on a key of another type would raise.
  if rcall("TYPE", nextKey)["ok"] ~= "hash" then return end
  local payload = rcall("HMGET", nextKey, "name", "data", "opts", "pk", "pd", "pdk", "rjk",
                        "jid")
  local name, data, optsText = payload[1], payload[2], payload[3]
  local parentKey, parentJson, parentDependenciesKey = payload[4], payload[5], payload[6]
  local repeatJobKey, storedId = payload[7], payload[8]

  local opts = wPayloadOptions(optsText)
  local de = wPresent(opts["de"])
  if type(de) ~= "table" then de = {} end
  local ttl = wNumber(de["ttl"])
  if ttl then ttl = math.floor(ttl) end
  if wPresent(de["keepLastIfActive"]) == true then ttl = nil end
  local delay = wNumber(opts["delay"]) or 0
  local priority = wNumber(opts["priority"]) or 0

  -- The counter moves on every requeue, as other clients' ids depend on it.
  local counter = redis.pcall("INCR", queueBase .. "id")
  local jobId = nil
  if type(storedId) == "string" and storedId ~= ""
    and rcall("EXISTS", queueBase .. storedId) == 0 then
    jobId = storedId
  elseif type(counter) == "number" then
    jobId = tostring(counter)
  end
  if not jobId then return end
  local jobKey = queueBase .. jobId

  local fields = {"timestamp", nowText, "delay", delay, "priority", priority,
                  "deid", deduplicationId}
  local function put(field, value)
    if type(value) == "string" then
      fields[#fields + 1] = field
      fields[#fields + 1] = value
    end
  end
  put("name", name)
  put("data", data)
  put("opts", optsText)
  put("parentKey", parentKey)
  put("parent", parentJson)
  put("rjk", repeatJobKey)
  -- pcall: the only write of a key named by the payload; nothing else is written when it fails.
  local stored = redis.pcall("HSET", jobKey, unpack(fields))
  if type(stored) == "table" and stored.err then return end

  if ttl and ttl > 0 then
    rcall("SET", deduplicationKey, jobId, "PX", ttl)
  else
    rcall("SET", deduplicationKey, jobId)
  end
  emit("added", "jobId", jobId, "name", type(name) == "string" and name or "")
  if delay ~= 0 then
    local readyAt = readyAtOf(now, delay)
    pushToDelayed(K.delayed, K.marker, readyAt, jobId)
    emit("delayed", "jobId", jobId, "delay", readyAt)
  else
    local gated = queueGates(wMeta(), K.active)
    if priority > 0 then
      pushToPrioritized(K.prioritized, K.pc, K.marker, priority, gated, jobId)
    else
      pushToWait(K.wait, K.marker, wPresent(opts["lifo"]) == true, gated, jobId)
    end
    emit("waiting", "jobId", jobId)
  end
  if type(parentDependenciesKey) == "string" then
    redis.pcall("SADD", parentDependenciesKey, jobKey)
  end
  rcall("DEL", nextKey)
end

local function wFinalizeDeduplication(jobId, jobKey, now, nowText)
  local deduplicationId = rcall("HGET", jobKey, "deid")
  if not deduplicationId then return end
  local deduplicationKey = queueBase .. "de:" .. deduplicationId
  wReleaseDeduplication(jobId, deduplicationKey)
  wRequeueDeduplicated(deduplicationId, deduplicationKey, now, nowText)
end
