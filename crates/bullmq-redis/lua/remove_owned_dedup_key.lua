--[[
  remove_owned_dedup_key.lua: deletes a deduplication key only while a given job owns it (Node
  `job.removeDeduplicationKey()`).

  KEYS: 1 deduplication key (`de:{id}`)
  ARGV: 1 job id
  Returns 1 deleted, 0 absent or owned by another job (nothing written).
]]
local rcall = redis.call
if rcall("GET", KEYS[1]) == ARGV[1] then
  return rcall("DEL", KEYS[1])
end
return 0
