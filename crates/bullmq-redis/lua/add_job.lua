--[[
  add_job.lua: adds one job (standard, LIFO, prioritized or delayed, chosen from its options).

  KEYS: 1 wait, 2 meta, 3 id, 4 delayed, 5 prioritized, 6 pc, 7 active, 8 events, 9 marker
  ARGV: 1 queue base (`{prefix}:{queue}:`), 2 custom job id or "", 3 name, 4 data JSON,
        5 opts JSON (stored verbatim), 6 timestamp (ms), 7 parent key or "",
        8 parent JSON or "", 9 parent dependencies key or "", 10 repeat job key or ""
  Returns the job id (the existing one for a duplicate or deduplicated job), or -5 when the
  parent job does not exist.
]]
-- Decoded first: a malformed opts JSON raises before anything is written.
local opts = cjson.decode(ARGV[5])
local ctx = newAddBatch(addJobKeys(), ARGV[1], 0)
local result = addJob(ctx, ARGV[2], ARGV[3], ARGV[4], ARGV[5], opts, ARGV[6], ARGV[7], ARGV[8],
  ARGV[9], ARGV[10])
finishAddBatch(ctx)
return result
