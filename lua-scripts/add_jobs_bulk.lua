--[[
  add_jobs_bulk.lua: adds N jobs in one call, each exactly as add_job.lua would.

  KEYS: as add_job.lua.
  ARGV: 1 queue base, then 9 arguments per job in add_job.lua's order (ARGV 2..10 there).
  Returns one entry per job: its id, or -5 when its parent does not exist.
]]
local keys = addJobKeys()
local base = ARGV[1]
local results = {}
-- Decode every opts first, so a malformed one fails the call before anything is written.
for i = 5, #ARGV, 9 do
  cjson.decode(ARGV[i])
end
for i = 2, #ARGV, 9 do
  results[#results + 1] = addJob(keys, base, ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3],
    ARGV[i + 4], ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8])
end
return results
