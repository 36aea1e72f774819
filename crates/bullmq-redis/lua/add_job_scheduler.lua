--[[
  add_job_scheduler.lua: creates or replaces a job scheduler and its pending iteration (Node's
  `Queue.upsertJobScheduler`).

  KEYS: 1 repeat, 2 delayed, 3 wait, 4 meta, 5 prioritized, 6 marker, 7 id, 8 events, 9 pc,
        10 active
  ARGV: 1 queue base, 2 scheduler id, 3 next run of a cron scheduler ("" for every), 4 now,
        5 name, 6 tz, 7 pattern, 8 every, 9 limit, 10 offset, 11 startDate, 12 endDate
        (6-12: "" when absent), 13 template data JSON, 14 template opts JSON,
        15 iteration opts JSON
  Returns {jobId, delay}, or -10 (a cron iteration with that id exists and cannot be replaced)
  or -11 (every `every` slot scanned holds a job); nothing is written then but the events cap
  (Node removes the pending iteration before it refuses, which ends the series).

  An existing scheduler's pending iteration is replaced when it has not started (delayed,
  prioritized or waiting): an `every` scheduler whose interval did not change keeps its slot.
]]
-- Decoded first: malformed options raise before anything is written.
local opts = cjson.decode(ARGV[15])
local k = schedulerKeys()
local base = ARGV[1]
local id = ARGV[2]
local now = tonumber(ARGV[4])
local schedulerKey = k.repeatKey .. ":" .. id
local function arg(i)
  if ARGV[i] == "" then return nil end
  return ARGV[i]
end
local fields = {name = ARGV[5], tz = arg(6), pattern = arg(7), every = arg(8), limit = arg(9),
  startDate = arg(11), endDate = arg(12)}
local every = tonumber(fields.every)
local userOffset = tonumber(arg(10))

local maxEvents = getMaxEvents(k.meta)
local prev = tonumber(rcall("ZSCORE", k.repeatKey, id))
local nextMillis = tonumber(ARGV[3])
local offset = userOffset or 0
local newOffset = offset
local intervalChanged = false
if every then
  local from = prev
  if prev and tonumber(rcall("HGET", schedulerKey, "every")) ~= every then
    from = nil
    intervalChanged = true
  end
  nextMillis, newOffset = everyNextMillis(from, every, now, offset, fields.startDate)
end

-- Decided before anything is written: a refused upsert leaves the pending iteration (and so
-- the series) as it was, where Node has already removed it. A waiting iteration of a paused
-- queue counts as started, as in Node (which looks for it in the legacy `paused` list).
local pendingPrev = nil
if prev then
  local current = iterationId(id, prev)
  if rcall("EXISTS", base .. current) == 1 and (rcall("ZSCORE", k.delayed, current)
      or rcall("ZSCORE", k.prioritized, current)
      or (rcall("HEXISTS", k.meta, "paused") == 0 and rcall("LPOS", k.wait, current))) then
    pendingPrev = current
  end
end
local storedOffset = userOffset
if pendingPrev then
  if every and not intervalChanged then
    nextMillis = prev
  end
else
  storedOffset = newOffset
end

-- The replaced iteration's id is free: it goes before the new one is written.
local function taken(jobId)
  return jobId ~= pendingPrev and rcall("EXISTS", base .. jobId) == 1
end
local jobId = iterationId(id, nextMillis)
if taken(jobId) then
  if not every then
    return -10
  end
  -- Finished iterations of an earlier scheduler with this id may hold several slots.
  local scanned = 0
  repeat
    nextMillis = nextMillis + every
    jobId = iterationId(id, nextMillis)
    scanned = scanned + 1
  until not taken(jobId) or scanned >= 32
  if taken(jobId) then
    return -11
  end
end
if pendingPrev then
  if rcall("ZREM", k.delayed, pendingPrev) == 0 and rcall("ZREM", k.prioritized, pendingPrev) == 0 then
    rcall("LREM", k.wait, 1, pendingPrev)
  end
  purgeJob(base, pendingPrev, true)
end

local delay = nextMillis - now
if delay < 0 then delay = 0 end
storeScheduler(k.repeatKey, schedulerKey, id, nextMillis, fields, storedOffset, ARGV[13],
  ARGV[14])
incrCounter(k.id)
storeIteration(k, base, jobId, fields.name, ARGV[13], opts, now, id, delay, maxEvents)
return {jobId, delay}
