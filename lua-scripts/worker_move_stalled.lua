--[[
  Stalled-job recovery, at most once per interval across every worker of the queue.

  KEYS: the worker layout described in includes/worker_common.lua.
  ARGV[1] queue base, ARGV[2] max stalled count, ARGV[3] now (ms), ARGV[4] interval (ms).

  Jobs marked by the previous run (the `stalled` set) that still have no lock were abandoned by
  their worker: they go back to the wait list with `stc` incremented and a `stalled` event. A
  job stalled more often than allowed gets the deferred failure field `defa`, so the worker that
  picks it up next fails it. Afterwards every job currently active is marked for the next run;
  lock renewals take them out of the set again.

  Returns the ids moved back to wait.
]]
local maxStalled = tonumber(ARGV[2])
if rcall("SET", K.stalledCheck, ARGV[3], "PX", ARGV[4], "NX") == false then
  return {}
end

local recovered = {}
local marked = rcall("SMEMBERS", K.stalled)
if #marked > 0 then
  rcall("DEL", K.stalled)
  for _, jobId in ipairs(marked) do
    if string.sub(jobId, 1, 2) == "0:" then
      rcall("LREM", K.active, 1, jobId)
    else
      local jobKey = queueBase .. jobId
      if rcall("EXISTS", jobKey .. ":lock") == 0 and rcall("LREM", K.active, 1, jobId) > 0 then
        local stalledCount = rcall("HINCRBY", jobKey, "stc", 1)
        -- Jobs produced by a scheduler are re-run rather than failed.
        local schedulerId = rcall("HGET", jobKey, "rjk")
        local scheduled = false
        if schedulerId then
          scheduled = rcall("EXISTS", K.repeatKey .. ":" .. schedulerId) == 1
            or rcall("ZSCORE", K.repeatKey, schedulerId) ~= false
        end
        if stalledCount > maxStalled and not scheduled then
          rcall("HSET", jobKey, "defa", "job stalled more than allowable limit")
        end
        local gated = wQueueGates()
        rcall("RPUSH", K.wait, jobId)
        if not gated then wSignalReady() end
        wEvent("event", "waiting", "jobId", jobId, "prev", "active")
        wEvent("event", "stalled", "jobId", jobId)
        recovered[#recovered + 1] = jobId
      end
    end
  end
end

local active = rcall("LRANGE", K.active, 0, -1)
for first = 1, #active, 5000 do
  rcall("SADD", K.stalled, unpack(active, first, math.min(first + 4999, #active)))
end
return recovered
