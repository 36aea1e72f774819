--[[
  remove_job.lua: removes one job, whatever state it is in, with all its keys.

  KEYS: 1 job hash key, 2 repeat
  ARGV: 1 job id, 2 "1" to remove its children (flows) too, 3 queue base
  Returns 1 removed, 0 refused because the job (or a pending child) is locked by a worker,
  -1 no such job, -8 the job is the pending run of a job scheduler (remove the scheduler).
  Event: `removed` (jobId, prev) in the queue of each removed job.
]]
local rcall = redis.call
local jobKey, repeatKey = KEYS[1], KEYS[2]
local jobId, withChildren, base = ARGV[1], ARGV[2] == "1", ARGV[3]

if isSchedulerJob(jobId, jobKey, repeatKey) then
  return -8
end
if isLockedDeep(base, jobId, withChildren) then
  return 0
end
local existed = rcall("EXISTS", jobKey) == 1
local prev = removeJobEverywhere(base, jobId, withChildren)
if not existed and prev == "unknown" then
  return -1
end
return 1
