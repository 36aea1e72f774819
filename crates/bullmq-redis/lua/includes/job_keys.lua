--[[
  job_keys.lua: deleting the Redis keys of jobs.

  removeJobKeys(jobKey) -> number of keys deleted
    The job hash and the per-job keys hanging off it: `:logs` and the flow keys
    `:dependencies`, `:processed`, `:failed`, `:unsuccessful` (the set Node's scripts delete).
    Not `:lock`: a job is only removed while unlocked, except by obliterate, which deletes the
    locks of the active jobs it removes itself (as Node's does). Does not touch the state
    lists/zsets; callers remove the id from those themselves (often in one batched command).
  removeJobKeysOf(base, jobIds)
    The same for many jobs of one queue (`base .. jobId` is a job key), in as few DELs as
    unpack allows.
]]
local rcall = redis.call

local function removeJobKeys(jobKey)
  return rcall("DEL", jobKey, jobKey .. ":logs", jobKey .. ":dependencies",
    jobKey .. ":processed", jobKey .. ":failed", jobKey .. ":unsuccessful")
end

local function removeJobKeysOf(base, jobIds)
  local keys = {}
  for i, jobId in ipairs(jobIds) do
    local jobKey = base .. jobId
    local n = #keys
    keys[n + 1] = jobKey
    keys[n + 2] = jobKey .. ":logs"
    keys[n + 3] = jobKey .. ":dependencies"
    keys[n + 4] = jobKey .. ":processed"
    keys[n + 5] = jobKey .. ":failed"
    keys[n + 6] = jobKey .. ":unsuccessful"
    if n + 6 >= 4800 or i == #jobIds then
      rcall("DEL", unpack(keys))
      keys = {}
    end
  end
end
