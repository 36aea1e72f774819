--[[
  remove_job_keys.lua: deleting the Redis keys of one job.

  removeJobKeys(jobKey) -> number of keys deleted
    The job hash and every per-job key BullMQ hangs off it: `:logs`, `:lock`, and the flow keys
    `:dependencies`, `:processed`, `:failed`, `:unsuccessful`. Does not touch the state
    lists/zsets; callers remove the id from those themselves (often in one batched command).
]]
local rcall = redis.call

local function removeJobKeys(jobKey)
  return rcall("DEL", jobKey, jobKey .. ":logs", jobKey .. ":lock", jobKey .. ":dependencies",
    jobKey .. ":processed", jobKey .. ":failed", jobKey .. ":unsuccessful")
end
