--[[
  scheduler_job.lua: recognising the next run of a job scheduler, which admin commands keep.

  isSchedulerJob(jobId, jobKey, repeatKey) -> boolean
    True when the job hash names a scheduler (`rjk`) that is still registered in `repeat` and
    the job is that scheduler's pending iteration (`repeat:{schedulerId}:{millis}`).
]]
local rcall = redis.call

local function isSchedulerJob(jobId, jobKey, repeatKey)
  local schedulerId = rcall("HGET", jobKey, "rjk")
  if not schedulerId then
    return false
  end
  local millis = rcall("ZSCORE", repeatKey, schedulerId)
  return millis ~= false and millis ~= nil and jobId == ("repeat:" .. schedulerId .. ":" .. millis)
end
