--[[
  move_jobs_to_wait.lua: one batch of finished or delayed jobs back to `wait` (Node
  `queue.retryJobs` and `queue.promoteJobs`; the caller repeats while a batch comes back full).

  KEYS: 1 the source set (`failed`, `completed` or `delayed`), 2 wait, 3 marker, 4 meta,
        5 active, 6 events
  ARGV: 1 queue base, 2 batch size (at least 1), 3 the highest score taken (a finish time in
        ms, or "+inf"), 4 the source state's name, 5 the outcome field a retry clears
        (`failedReason` / `returnvalue`; empty for `delayed`)
  Returns how many jobs moved; a full batch means more may be left.
  Effects: the lowest scores first (oldest finished, soonest due). Each job is LPUSHed to the
  back of `wait` whatever its priority or `lifo`, as Node's script (which never reads them);
  a retried job loses finishedOn, processedOn and its outcome and becomes a pending dependency
  of its parent again; a promoted job keeps its fields (`delay` too, as Node). One base marker
  unless the queue is paused or maxed.
  Events: `waiting` (jobId, prev = the state) per job, written before the moves, as Node.
]]
local rcall = redis.call
local sourceKey, waitKey, markerKey, metaKey, activeKey, eventsKey =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local base, prev, outcomeField = ARGV[1], ARGV[4], ARGV[5]
local count = math.max(1, math.floor(tonumber(ARGV[2]) or 1))

local blocked = isPausedOrMaxed(metaKey, activeKey)
local ids = rcall("ZRANGEBYSCORE", sourceKey, 0, ARGV[3], "LIMIT", 0, count)
if #ids == 0 then return 0 end

if outcomeField ~= "" then
  for _, jobId in ipairs(ids) do
    local jobKey = base .. jobId
    rcall("HDEL", jobKey, "finishedOn", "processedOn", outcomeField)
    backToParentDependencies(jobKey, rcall("HGET", jobKey, "parentKey"), prev)
  end
end

-- Node stores the default cap without `version` here, and caps every event.
local maxEvents = maxEventsOrDefault(metaKey, rcall("HGET", metaKey, "opts.maxLenEvents"))
for _, jobId in ipairs(ids) do
  emitEvent(eventsKey, maxEvents, "waiting", "jobId", jobId, "prev", prev)
end
forEachBatch(ids, 5000, function(from, to)
  rcall("ZREM", sourceKey, unpack(ids, from, to))
  rcall("LPUSH", waitKey, unpack(ids, from, to))
end)
addBaseMarker(markerKey, blocked)
return #ids
