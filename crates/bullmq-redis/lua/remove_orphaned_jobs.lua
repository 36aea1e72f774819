--[[
  remove_orphaned_jobs.lua: deletes the keys of candidate job ids that no state of the queue
  references (one step of Node `queue.removeOrphanedJobs(count, limit)`; the caller scans the
  queue's keys and passes the candidates).

  KEYS: 1 queue base ("{prefix}:{queue}:")
  ARGV: candidate job ids
  Returns how many candidates were orphans; for each, the job hash and its `:logs`,
  `:dependencies`, `:processed`, `:failed`, `:unsuccessful` and `:lock` keys are deleted.
  A candidate is referenced when it is in a list (`wait`, `paused`, `active`), a zset
  (`waiting-children`, `delayed`, `prioritized`, `completed`, `failed`, `repeat`, `marker`) or
  the `stalled` set of the queue.
]]
local rcall = redis.call
local base = KEYS[1]
local lists = {"active", "wait", "paused"}
local zsets = {"waiting-children", "delayed", "prioritized", "completed", "failed", "repeat",
  "marker"}
local subKeys = {"logs", "dependencies", "processed", "failed", "unsuccessful", "lock"}

-- Each state key is asked only when it has its type, so no command can raise once writing
-- has begun (a missing key has type "none" and holds nothing).
local states = {}
local function addStates(names, wanted)
  for _, name in ipairs(names) do
    local key = base .. name
    if rcall("TYPE", key)["ok"] == wanted then
      states[#states + 1] = {key, wanted}
    end
  end
end
addStates(lists, "list")
addStates(zsets, "zset")
addStates({"stalled"}, "set")

local function referenced(jobId)
  for _, state in ipairs(states) do
    local key, kind = state[1], state[2]
    if kind == "list" then
      if rcall("LPOS", key, jobId) then
        return true
      end
    elseif kind == "zset" then
      if rcall("ZSCORE", key, jobId) then
        return true
      end
    elseif rcall("SISMEMBER", key, jobId) == 1 then
      return true
    end
  end
  return false
end

local removed = 0
for i = 1, #ARGV do
  local jobId = ARGV[i]
  if not referenced(jobId) then
    local jobKey = base .. jobId
    local doomed = {jobKey}
    for _, suffix in ipairs(subKeys) do
      doomed[#doomed + 1] = jobKey .. ":" .. suffix
    end
    rcall("DEL", unpack(doomed))
    removed = removed + 1
  end
end
return removed
