--[[
  update_data.lua: replaces a job's data.

  KEYS: 1 job hash
  ARGV: 1 data JSON
  Returns 0, or -1 when the job does not exist.
]]
local rcall = redis.call
if rcall("EXISTS", KEYS[1]) ~= 1 then
  return -1
end
rcall("HSET", KEYS[1], "data", ARGV[1])
return 0
