--[[
  next_scheduler_iteration.lua: creates the iteration after a started one (what Node's Worker
  does through `updateJobScheduler` when it starts a scheduler's job).

  KEYS: 1 repeat, 2 delayed, 3 wait, 4 meta, 5 prioritized, 6 marker, 7 id, 8 events, 9 pc,
        10 active
  ARGV: 1 queue base, 2 scheduler id, 3 next run of a cron scheduler ("" for every), 4 now,
        5 started job id, 6 next iteration opts JSON, 7 "1" when the id has the shape of a
        BullMQ 5 repeatable-job key
  Returns {1, jobId} created, {2, jobId} already there (event `duplicated`), {0} when the
  started job is not the scheduler's current iteration (stalled or retried, or the scheduler
  is gone or replaced), {3} for a legacy repeatable job. Only the current iteration's start
  moves the scheduler on, so two workers cannot create one iteration twice.
]]
local opts = cjson.decode(ARGV[6])
local k = schedulerKeys()
local base = ARGV[1]
local id = ARGV[2]
local now = tonumber(ARGV[4])
local schedulerKey = k.repeatKey .. ":" .. id

local prev = tonumber(rcall("ZSCORE", k.repeatKey, id))
if not prev then
  return {0}
end
if ARGV[7] == "1" and rcall("HEXISTS", schedulerKey, "ic") == 0 then
  return {3}
end
local attrs = rcall("HMGET", schedulerKey, "name", "data", "every", "startDate", "offset", "ic")
if not attrs[1] then
  -- No hash to take the name from: nothing can be created (Node's getters drop such entries).
  return {0}
end
local repeatOpts = opts["repeat"]
if type(repeatOpts) ~= "table" then repeatOpts = {} end
local every = tonumber(attrs[3]) or tonumber(repeatOpts["every"])
local nextMillis = tonumber(ARGV[3])
if every then
  local offset = attrs[5] or repeatOpts["offset"] or 0
  nextMillis = everyNextMillis(prev, every, now, offset, attrs[4])
end
if not nextMillis or ARGV[5] ~= iterationId(id, prev) then
  return {0}
end

local maxEvents = getMaxEvents(k.meta)
local jobId = iterationId(id, nextMillis)
if rcall("EXISTS", base .. jobId) == 1 then
  emitEvent(k.events, maxEvents, "duplicated", "jobId", jobId)
  return {2, jobId}
end
rcall("ZADD", k.repeatKey, nextMillis, id)
-- Read then written: a count another client overwrote with text restarts rather than raising.
rcall("HSET", schedulerKey, "ic", (tonumber(attrs[6]) or 0) + 1)
incrCounter(k.id)
local delay = nextMillis - now
if delay < 0 then delay = 0 end
storeIteration(k, base, jobId, attrs[1], attrs[2] or "{}", opts, now, id, delay, maxEvents)
return {1, jobId}
