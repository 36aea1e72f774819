--[[
  scheduler_next.lua: the iteration that follows a started one. Needs scheduler_store.lua (and
  what it needs).

  nextIteration(k, base, id, producerId, nextMillis, opts, now, legacyShape) -> code, jobId
    Creates the iteration after the started job `producerId` of scheduler `id`, if that job is
    the scheduler's current iteration (its run is the scheduler's score in `repeat`): only the
    current iteration's start moves the scheduler on, so a stalled or retried iteration, or two
    workers racing, create nothing twice. For `every` the slot is computed from the stored run
    (`nextMillis`, the cron run the caller computed, is ignored then). `opts` are the next
    iteration's options (`delay` and `jobId` are set here). Codes: 1 created, 2 already there
    (event `duplicated`), 0 not the current iteration (or the scheduler is gone), 3 a BullMQ 5
    repeatable job (`legacyShape` and no `ic` in the hash). k as in storeIteration plus
    repeatKey and id.
  everyIterationOpts(id, opts, now) -> options | "ended" | nil
    The next iteration's options for an `every` scheduler, computed from the started job's
    decoded options exactly as bullmq-protocol's `plan_next_iteration` does: `repeat.count`
    + 1, `timestamp` now, `repeatJobKey`, no `immediately`, the offset only when non-zero.
    "ended" when that count passes `repeat.limit` or now is past `repeat.endDate`; nil when the
    options are not a plain `every` schedule (a cron pattern, numbers that are not
    non-negative integers, a `prevMillis`): the caller leaves those to the Rust plan.
]]
local rcall = redis.call

local function nextIteration(k, base, id, producerId, nextMillis, opts, now, legacyShape)
  local schedulerKey = k.repeatKey .. ":" .. id
  local prev = tonumber(rcall("ZSCORE", k.repeatKey, id))
  if not prev then
    return 0
  end
  if legacyShape and rcall("HEXISTS", schedulerKey, "ic") == 0 then
    return 3
  end
  local attrs = rcall("HMGET", schedulerKey, "name", "data", "every", "startDate", "offset", "ic")
  if not attrs[1] then
    -- No hash to take the name from: nothing can be created (Node's getters drop such entries).
    return 0
  end
  local repeatOpts = opts["repeat"]
  if type(repeatOpts) ~= "table" then repeatOpts = {} end
  local every = tonumber(attrs[3]) or tonumber(repeatOpts["every"])
  if every then
    local offset = attrs[5] or repeatOpts["offset"] or 0
    nextMillis = everyNextMillis(prev, every, now, offset, attrs[4])
  end
  if not nextMillis or producerId ~= iterationId(id, prev) then
    return 0
  end

  local maxEvents = getMaxEvents(k.meta)
  local jobId = iterationId(id, nextMillis)
  if rcall("EXISTS", base .. jobId) == 1 then
    emitEvent(k.events, maxEvents, "duplicated", "jobId", jobId)
    return 2, jobId
  end
  rcall("ZADD", k.repeatKey, nextMillis, id)
  -- Read then written: a count another client overwrote with text restarts rather than raising.
  rcall("HSET", schedulerKey, "ic", (tonumber(attrs[6]) or 0) + 1)
  incrCounter(k.id)
  local delay = nextMillis - now
  if delay < 0 then delay = 0 end
  storeIteration(k, base, jobId, attrs[1], attrs[2] or "{}", opts, now, id, delay, maxEvents)
  return 1, jobId
end

-- A non-negative integer option: the number, nil when absent, false when anything else.
local function plainCount(value)
  if value == nil or value == cjson.null then return nil end
  if type(value) ~= "number" or value < 0 or value ~= math.floor(value) then return false end
  return value
end

local function everyIterationOpts(id, opts, now)
  local r = opts["repeat"]
  if type(r) ~= "table" or (r["pattern"] ~= nil and r["pattern"] ~= cjson.null) then
    return nil
  end
  if opts["prevMillis"] ~= nil and opts["prevMillis"] ~= cjson.null then
    return nil
  end
  local every, count = plainCount(r["every"]), plainCount(r["count"])
  local limit, endDate, offset = plainCount(r["limit"]), plainCount(r["endDate"]),
    plainCount(r["offset"])
  if not every or every == 0 or count == false or limit == false or endDate == false
      or offset == false then
    return nil
  end
  local iteration = (count or 0) + 1
  if (limit and iteration > limit) or (endDate and now > endDate) then
    return "ended"
  end
  r["immediately"] = nil
  r["count"] = iteration
  if offset == 0 then r["offset"] = nil end
  opts["timestamp"] = now
  opts["repeatJobKey"] = id
  opts["jobId"] = nil
  opts["delay"] = nil
  return opts
end
