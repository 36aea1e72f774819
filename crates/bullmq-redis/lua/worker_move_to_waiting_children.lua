--[[
  worker_move_to_waiting_children.lua: a running job steps aside until its children are done
  (the step-job pattern; Node's `job.moveToWaitingChildren(token, { child })`).

  KEYS: the worker layout (includes/worker_common.lua), then
    KEYS[18] waiting-children
  ARGV: 1 queue base, 2 job id, 3 lock token ("0": no lock check, as Node allows),
        4 child job key (`{prefix}:{queue}:{id}`, "" for any pending child), 5 now (ms)
  Returns
     0  moved: the job left `active` and its lock (and `stalled`), it is in `waiting-children`
        scored by now, and a `waiting-children` event (prev active) was emitted
     1  nothing to wait for (no pending child, or the given child is not pending): untouched
    -1  no such job       -9  a child failed for good (`:unsuccessful` is not empty)
    -2  no lock           -6  the lock is held under another token
    -3  the job is not in `active`
  The checks come in Node's order and all of them before the first write, so a refusal leaves
  everything as it was (Node has already released the lock when it answers -3).
]]
local jobId, token, childKey, now = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local waitingChildrenKey = KEYS[18]
local jobKey = queueBase .. jobId

if rcall("EXISTS", jobKey) ~= 1 then return -1 end
if rcall("ZCARD", jobKey .. ":unsuccessful") ~= 0 then return -9 end

local pending
if childKey ~= "" then
  pending = rcall("SISMEMBER", jobKey .. ":dependencies", childKey) == 1
else
  pending = rcall("SCARD", jobKey .. ":dependencies") > 0
end
if not pending then return 1 end

if token ~= "0" then
  local held = rcall("GET", jobKey .. ":lock")
  if not held then return -2 end
  if held ~= token then return -6 end
end
if not rcall("LPOS", K.active, jobId) then return -3 end

rcall("DEL", jobKey .. ":lock")
rcall("SREM", K.stalled, jobId)
rcall("LREM", K.active, -1, jobId)
rcall("ZADD", waitingChildrenKey, now, jobId)
emit("waiting-children", "jobId", jobId, "prev", "active")
return 0
