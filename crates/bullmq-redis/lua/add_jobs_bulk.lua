--[[
  add_jobs_bulk.lua: adds N jobs in one call, each exactly as add_job.lua would.

  KEYS: as add_job.lua.
  ARGV: 1 queue base, then one record per job, told apart by its first argument:
    ""  a plain job (no custom id, parent or scheduler): name, data JSON, opts JSON, timestamp
        (5 arguments in all);
    "+" any other job: the 9 arguments of add_job.lua's ARGV 2..10 (10 in all).
  Returns one entry per job: its id, or -5 when its parent does not exist.
]]
local argc = #ARGV
local decoded = {}
local withParent = false
-- Decode every opts first, so a malformed one fails the call before anything is written.
local i = 2
while i <= argc do
  if ARGV[i] == "" then
    decoded[#decoded + 1] = cjson.decode(ARGV[i + 3])
    i = i + 5
  else
    decoded[#decoded + 1] = cjson.decode(ARGV[i + 4])
    if ARGV[i + 6] ~= "" then
      withParent = true
    end
    i = i + 10
  end
end
-- A job whose parent is missing does not take a number, so numbers are reserved up front only
-- when no job names a parent.
local reserve = 0
if not withParent then
  reserve = #decoded
end
local ctx = newAddBatch(addJobKeys(), ARGV[1], reserve)
local results = {}
local job = 0
i = 2
while i <= argc do
  job = job + 1
  if ARGV[i] == "" then
    results[job] = addJob(ctx, "", ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], decoded[job],
      ARGV[i + 4], "", "", "", "")
    i = i + 5
  else
    results[job] = addJob(ctx, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], decoded[job],
      ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9])
    i = i + 10
  end
end
finishAddBatch(ctx)
return results
