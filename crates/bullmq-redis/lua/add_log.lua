--[[
  add_log.lua: appends a line to a job's log, optionally keeping only the newest lines.

  KEYS: 1 job hash, 2 job logs list
  ARGV: 1 job id, 2 log line, 3 lines to keep ("" = all)
  Returns the number of lines now kept, or -1 when the job does not exist.
]]
local rcall = redis.call
if rcall("EXISTS", KEYS[1]) ~= 1 then
  return -1
end
local count = rcall("RPUSH", KEYS[2], ARGV[2])
local keep = tonumber(ARGV[3])
if keep then
  rcall("LTRIM", KEYS[2], -keep, -1)
  return math.min(keep, count)
end
return count
