--[[
  next_scheduler_iteration.lua: creates the iteration after a started one (what Node's Worker
  does through `updateJobScheduler` when it starts a scheduler's job); see nextIteration in
  includes/scheduler_next.lua.

  KEYS: 1 repeat, 2 delayed, 3 wait, 4 meta, 5 prioritized, 6 marker, 7 id, 8 events, 9 pc,
        10 active
  ARGV: 1 queue base, 2 scheduler id, 3 next run of a cron scheduler ("" for every), 4 now,
        5 started job id, 6 next iteration opts JSON, 7 "1" when the id has the shape of a
        BullMQ 5 repeatable-job key
  Returns {1, jobId} created, {2, jobId} already there, {0} not the current iteration, {3} a
  legacy repeatable job.
]]
local opts = cjson.decode(ARGV[6])
local code, jobId = nextIteration(schedulerKeys(), ARGV[1], ARGV[2], ARGV[5], tonumber(ARGV[3]),
  opts, tonumber(ARGV[4]), ARGV[7] == "1")
if jobId then
  return {code, jobId}
end
return {code}
