--[[
  worker_move_to_wait.lua: a running job goes back to wait without counting an attempt (the
  step-job pattern; Node's `job.moveToWait(token)`, script moveJobFromActiveToWait).

  KEYS: the worker layout (includes/worker_common.lua)
  ARGV: 1 queue base, 2 job id, 3 lock token ("0": no lock check, as Node allows)
  Returns
    >= 0  moved: the lock released (and `stalled` left), out of `active`, then
          - a job with a priority into `prioritized` with counter 0 (ahead of its priority,
            as Node; no marker, as Node),
          - else to the head of `wait` (RPUSH: the next job taken) with the base marker unless
            the queue is paused or at its global concurrency;
          a `waiting` event (prev active). The number is the queue limiter's remaining ms (0
          when not rate-limited), as Node returns it. `atm` is untouched.
    -1  no such job    -2  no lock    -6  the lock is held under another token
    -3  the job is not in `active`
  Every check comes before the first write (Node has already released the lock when it finds
  the job missing from active).
]]
local jobId, token = ARGV[2], ARGV[3]
local jobKey = queueBase .. jobId

if rcall("EXISTS", jobKey) ~= 1 then return -1 end
if token ~= "0" then
  local held = rcall("GET", jobKey .. ":lock")
  if not held then return -2 end
  if held ~= token then return -6 end
end
if not rcall("LPOS", K.active, jobId) then return -3 end

rcall("DEL", jobKey .. ":lock")
rcall("SREM", K.stalled, jobId)
rcall("LREM", K.active, 1, jobId)
local priority = tonumber(rcall("HGET", jobKey, "priority")) or 0
if priority > 0 then
  rcall("ZADD", K.prioritized, priority * 0x100000000, jobId)
else
  local blocked = queueGates(wMeta(), K.active)
  pushToWait(K.wait, K.marker, true, blocked, jobId)
end
emit("waiting", "jobId", jobId, "prev", "active")

local pttl = rcall("PTTL", K.limiter)
if pttl > 0 then return pttl end
return 0
