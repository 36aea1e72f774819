--[[
  extend_lock.lua: renews one job's lock for the token holding it (Node `job.extendLock`).

  KEYS: 1 the job's `:lock`, 2 stalled
  ARGV: 1 token, 2 lock duration in ms, 3 job id
  Returns 1 renewed (and the job taken out of `stalled`), 0 no lock, -1 the lock carries
  another token. Nothing is written on a refusal. (Node's script answers 0 to both refusals;
  the writes are the same.)
]]
local rcall = redis.call
local held = rcall("GET", KEYS[1])
if not held then return 0 end
if held ~= ARGV[1] then return -1 end
rcall("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
rcall("SREM", KEYS[2], ARGV[3])
return 1
