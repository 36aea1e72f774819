--[[
  read_job_schedulers.lua: job schedulers with their next run, read atomically.

  KEYS: 1 repeat
  ARGV: "one", id | "range", start, end, asc ("1": soonest first)
  Returns a flat array of {id, next, {hash field, value, ...}} triples (no triple for an id
  that is not in `repeat`).
]]
local rcall = redis.call
local ids = {}
if ARGV[1] == "one" then
  local score = rcall("ZSCORE", KEYS[1], ARGV[2])
  if score then
    ids = {ARGV[2], score}
  end
elseif ARGV[3] == nil then
  return redis.error_reply("read_job_schedulers: bad arguments")
else
  local command = ARGV[4] == "1" and "ZRANGE" or "ZREVRANGE"
  ids = rcall(command, KEYS[1], ARGV[2], ARGV[3], "WITHSCORES")
end
local out = {}
for i = 1, #ids, 2 do
  out[#out + 1] = ids[i]
  out[#out + 1] = ids[i + 1]
  out[#out + 1] = rcall("HGETALL", KEYS[1] .. ":" .. ids[i])
end
return out
