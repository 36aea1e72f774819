--[[
  retry_job.lua: moves a finished job back to be processed again (Node `job.retry`).

  KEYS: 1 job hash, 2 the finished set it must be in (`failed` or `completed`), 3 wait,
        4 prioritized, 5 pc, 6 marker, 7 meta, 8 active, 9 events
  ARGV: 1 job id, 2 that state's name (`failed` / `completed`), 3 the outcome field to clear
        (`failedReason` / `returnvalue`), 4 "1" to clear `atm`, 5 "1" to clear `ats`
  Returns 1 moved, -1 no such job, -3 the job is not in that set. Nothing is written on a
  refusal; the checks (existence, membership, the stored options) all come before the first
  write.
  Effects: clears finishedOn, processedOn and the outcome (and atm / ats), queues the job as
  its priority and `lifo` say (waking a worker unless the queue is paused or maxed), returns a
  flow child to its parent's pending dependencies if the parent still lists it as finished.
  Event: `waiting` (jobId, prev = the state).
]]
local rcall = redis.call
local jobKey, finishedKey, waitKey, prioritizedKey, pcKey, markerKey, metaKey, activeKey,
  eventsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local jobId, prev, outcomeField = ARGV[1], ARGV[2], ARGV[3]

if rcall("EXISTS", jobKey) ~= 1 then
  return -1
end
if rcall("ZSCORE", finishedKey, jobId) == false then
  return -3
end
-- Read everything the moves depend on first; options that do not decode count as FIFO.
local fields = rcall("HMGET", jobKey, "priority", "opts", "parentKey")
local priority = tonumber(fields[1]) or 0
local lifo = false
if fields[2] then
  local ok, opts = pcall(cjson.decode, fields[2])
  if ok and type(opts) == "table" and opts["lifo"] == true then lifo = true end
end
local parentKey = fields[3]

rcall("ZREM", finishedKey, jobId)
local clear = { "finishedOn", "processedOn", outcomeField }
if ARGV[4] == "1" then clear[#clear + 1] = "atm" end
if ARGV[5] == "1" then clear[#clear + 1] = "ats" end
rcall("HDEL", jobKey, unpack(clear))

local blocked = isPausedOrMaxed(metaKey, activeKey)
if priority == 0 then
  pushToWait(waitKey, markerKey, lifo, blocked, jobId)
else
  pushToPrioritized(prioritizedKey, pcKey, markerKey, priority, blocked, jobId)
end

backToParentDependencies(jobKey, parentKey, prev)

emitEvent(eventsKey, getMaxEvents(metaKey), "waiting", "jobId", jobId, "prev", prev)
return 1
