--[[
  clean.lua: removes jobs of one state that are older than a cutoff, up to a limit.

  KEYS: 1 the state's list/zset, 2 events, 3 repeat, 4 meta
  ARGV: 1 queue base, 2 cutoff timestamp (ms; jobs at or before it go), 3 limit (0 = none),
        4 state: completed | failed | delayed | prioritized | wait | paused | active |
        waiting-children
  A job's age is read from: finishedOn (the zset score) for completed/failed/waiting-children;
  processedOn else timestamp for delayed; timestamp for prioritized; finishedOn, processedOn,
  timestamp (first present) for lists. Active jobs holding a lock and scheduler runs are kept.
  Lists are scanned from their oldest end, the last `limit` entries only when limited.
  Returns the removed ids. Event: `cleaned` (count).
]]
local rcall = redis.call
local setKey, eventsKey, repeatKey, metaKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local base, cutoff, limit, state = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local deleted = {}

local function ageOf(jobKey, fields)
  local values = rcall("HMGET", jobKey, unpack(fields))
  for i = 1, #fields do
    if values[i] then
      return tonumber(values[i])
    end
  end
  return nil
end

local function oldEnough(jobKey, fields)
  local age = ageOf(jobKey, fields)
  return age == nil or age <= cutoff
end

local function full()
  return limit > 0 and #deleted >= limit
end

if state == "wait" or state == "paused" or state == "active" then
  local first = 0
  if limit > 0 then
    first = -limit
  end
  local ids = rcall("LRANGE", setKey, first, -1)
  -- Entries are blanked in place (LSET) and dropped in one LREM at the end, so positions of
  -- the entries still to visit do not move.
  local blank = ""
  for i = #ids, 1, -1 do
    if full() then
      break
    end
    local jobId = ids[i]
    local jobKey = base .. jobId
    local free = state ~= "active" or rcall("EXISTS", jobKey .. ":lock") == 0
    if free and not isSchedulerJob(jobId, jobKey, repeatKey)
      and oldEnough(jobKey, {"finishedOn", "processedOn", "timestamp"}) then
      rcall("LSET", setKey, i - #ids - 1, blank)
      purgeJob(base, jobId, true)
      deleted[#deleted + 1] = jobId
    end
  end
  rcall("LREM", setKey, 0, blank)
else
  local ids
  local fields
  if state == "delayed" or state == "prioritized" then
    ids = rcall("ZRANGE", setKey, 0, -1)
    fields = state == "delayed" and {"processedOn", "timestamp"} or {"timestamp"}
  elseif limit > 0 then
    ids = rcall("ZRANGEBYSCORE", setKey, 0, cutoff, "LIMIT", 0, limit)
  else
    ids = rcall("ZRANGEBYSCORE", setKey, 0, cutoff)
  end
  for _, jobId in ipairs(ids) do
    if full() then
      break
    end
    local jobKey = base .. jobId
    if not isSchedulerJob(jobId, jobKey, repeatKey) and (fields == nil or oldEnough(jobKey, fields)) then
      purgeJob(base, jobId, true)
      deleted[#deleted + 1] = jobId
    end
  end
  zremAll(setKey, deleted)
end

emitEvent(eventsKey, getMaxEvents(metaKey), "cleaned", "count", #deleted)
return deleted
