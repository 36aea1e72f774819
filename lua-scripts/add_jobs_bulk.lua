--[[
  add_jobs_bulk.lua: adds N jobs in one call, each exactly as add_job.lua would.

  KEYS: as add_job.lua.
  ARGV: 1 queue base, then 9 arguments per job in add_job.lua's order (ARGV 2..10 there).
  Returns one entry per job: its id, or -5 when its parent does not exist.
]]
local decoded = {}
local withParent = false
-- Decode every opts first, so a malformed one fails the call before anything is written.
for i = 2, #ARGV, 9 do
  decoded[#decoded + 1] = cjson.decode(ARGV[i + 3])
  if ARGV[i + 5] ~= "" then
    withParent = true
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
for i = 2, #ARGV, 9 do
  job = job + 1
  results[job] = addJob(ctx, ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], decoded[job],
    ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8])
end
finishAddBatch(ctx)
return results
