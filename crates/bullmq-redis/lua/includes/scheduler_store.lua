--[[
  scheduler_store.lua: job schedulers (Node 6.7.0's `repeat` zset and `repeat:{id}` hashes)
  and the iterations they create. Needs scores, events, gates, markers, enqueue.

  everyNextMillis(prev, every, now, offset, startDate) -> next, offset
    The next slot of an `every` scheduler: the first run is at startDate (not before now), else
    at the first `k * every + offset` after now with an offset, else now; later runs are
    prev + every, or, when that is already past (workers were down), the first aligned slot
    after now: missed runs are skipped. The returned offset is `offset` when non-zero, else the
    run's phase in its slot. bullmq-protocol's `every_next_millis` is the same arithmetic.
  storeScheduler(repeatKey, schedulerKey, id, next, fields, offset, templateData, templateOpts)
    ZADD id at next, then rewrites the hash whole: name, tz, limit, pattern, startDate,
    endDate, every (those given), offset (`offset`, else the stored one), opts and data (unless
    `{}`), and ic (the stored count, 1 for a new scheduler).
  storeIteration(k, base, jobId, name, data, opts, now, schedulerId, delay, maxEvents)
    Creates an iteration as Node's addJobFromScheduler does: opts gets `delay` and `jobId`; the
    hash gets name, data, opts, timestamp, delay, priority, rjk (and deid when the template
    has a deduplication id); `added` (jobId, name), then delayed (event `delayed` with the
    ready-at time) or prioritized / wait (event `waiting`), gated like every add.
    k = {wait, meta, delayed, prioritized, pc, active, events, marker}.
  iterationId(id, millis) -> "repeat:{id}:{millis}"
]]
local rcall = redis.call

local function everyNextMillis(prev, every, now, offset, startDate)
  offset = tonumber(offset) or 0
  local nextMillis
  local function alignedAfterNow()
    local aligned = math.floor(now / every) * every + offset
    if aligned <= now then
      return aligned + every
    end
    return aligned
  end
  if prev == nil then
    local start = tonumber(startDate)
    if start then
      nextMillis = start > now and start or now
    elseif offset > 0 then
      nextMillis = alignedAfterNow()
    else
      nextMillis = now
    end
  else
    nextMillis = prev + every
    if nextMillis < now then
      nextMillis = alignedAfterNow()
    end
  end
  if offset == 0 then
    offset = nextMillis - math.floor(nextMillis / every) * every
  end
  return math.floor(nextMillis), math.floor(offset)
end

-- %d keeps 13-digit millis (and larger) out of Lua's %.14g exponent form.
local function iterationId(id, millis)
  return "repeat:" .. id .. ":" .. string.format("%d", millis)
end

local function storeScheduler(repeatKey, schedulerKey, id, nextMillis, fields, offset,
                              templateData, templateOpts)
  rcall("ZADD", repeatKey, nextMillis, id)
  local values = {"name", fields.name}
  for _, name in ipairs({"tz", "limit", "pattern", "startDate", "endDate", "every"}) do
    if fields[name] then
      values[#values + 1] = name
      values[#values + 1] = fields[name]
    end
  end
  if offset == nil then
    offset = tonumber(rcall("HGET", schedulerKey, "offset"))
  end
  if offset ~= nil then
    values[#values + 1] = "offset"
    values[#values + 1] = offset
  end
  if templateOpts ~= "{}" then
    values[#values + 1] = "opts"
    values[#values + 1] = templateOpts
  end
  if templateData ~= "{}" then
    values[#values + 1] = "data"
    values[#values + 1] = templateData
  end
  values[#values + 1] = "ic"
  values[#values + 1] = rcall("HGET", schedulerKey, "ic") or 1
  rcall("DEL", schedulerKey)
  rcall("HSET", schedulerKey, unpack(values))
end

local function storeIteration(k, base, jobId, name, data, opts, now, schedulerId, delay,
                              maxEvents)
  opts["delay"] = delay
  opts["jobId"] = jobId
  local priority = tonumber(opts["priority"]) or 0
  local fields = {"name", name, "data", data, "opts", cjson.encode(opts), "timestamp", now,
    "delay", delay, "priority", priority, "rjk", schedulerId}
  local de = opts["de"]
  if type(de) == "table" and de["id"] ~= nil and de["id"] ~= cjson.null then
    fields[#fields + 1] = "deid"
    fields[#fields + 1] = tostring(de["id"])
  end
  rcall("HSET", base .. jobId, unpack(fields))
  rcall("XADD", k.events, "*", "event", "added", "jobId", jobId, "name", name)
  if delay > 0 then
    local readyAt = readyAtOf(now, delay)
    pushToDelayed(k.delayed, k.marker, readyAt, jobId)
    emitEvent(k.events, maxEvents, "delayed", "jobId", jobId, "delay", readyAt)
  else
    local blocked = isPausedOrMaxed(k.meta, k.active)
    if priority > 0 then
      pushToPrioritized(k.prioritized, k.pc, k.marker, priority, blocked, jobId)
    else
      pushToWait(k.wait, k.marker, opts["lifo"] == true, blocked, jobId)
    end
    emitEvent(k.events, maxEvents, "waiting", "jobId", jobId)
  end
end

-- The KEYS layout shared by the scheduler scripts that create iterations.
local function schedulerKeys()
  return {repeatKey = KEYS[1], delayed = KEYS[2], wait = KEYS[3], meta = KEYS[4],
    prioritized = KEYS[5], marker = KEYS[6], id = KEYS[7], events = KEYS[8], pc = KEYS[9],
    active = KEYS[10]}
end
