--[[
  drain.lua: removes every job that is waiting (wait, legacy paused, prioritized) and, when
  asked, every delayed job. Active, completed and failed jobs stay, and so does the pending run
  of each job scheduler. No events are emitted (as BullMQ).

  KEYS: 1 wait, 2 paused, 3 delayed, 4 prioritized, 5 repeat
  ARGV: 1 queue base, 2 "1" to drain delayed jobs too
  Returns the number of jobs removed.
]]
local rcall = redis.call
local base = ARGV[1]
local repeatKey = KEYS[5]
local removed = 0

-- Ids to delete from `ids`, leaving scheduler runs alone; their keys are purged here.
local function purgeAll(ids)
  local purged = {}
  for _, jobId in ipairs(ids) do
    if not isSchedulerJob(jobId, base .. jobId, repeatKey) then
      purgeJob(base, jobId, true)
      purged[#purged + 1] = jobId
    end
  end
  removed = removed + #purged
  return purged
end

local function drainList(key)
  local ids = rcall("LRANGE", key, 0, -1)
  local purged = purgeAll(ids)
  if #purged == #ids then
    rcall("DEL", key)
  else
    for _, jobId in ipairs(purged) do
      rcall("LREM", key, 1, jobId)
    end
  end
end

local function drainZset(key)
  zremAll(key, purgeAll(rcall("ZRANGE", key, 0, -1)))
end

drainList(KEYS[1])
drainList(KEYS[2])
if ARGV[2] == "1" then
  drainZset(KEYS[3])
end
drainZset(KEYS[4])
return removed
