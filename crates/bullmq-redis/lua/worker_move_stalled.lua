--[[
  Stalled-job recovery, at most once per interval across every worker of the queue.

  KEYS: the worker layout described in includes/worker_common.lua.
  ARGV[1] queue base, ARGV[2] max stalled count, ARGV[3] now (ms), ARGV[4] interval (ms).

  Jobs marked by the previous run (the `stalled` set) that still have no lock were abandoned by
  their worker: they go back to the wait list with `stc` incremented and a `stalled` event. A
  job stalled more often than allowed gets the deferred failure field `defa`, so the worker that
  picks it up next fails it. Afterwards every job currently active is marked for the next run;
  lock renewals take them out of the set again.

  Returns { recovered, failed, dropped }: the ids moved back to wait, the jobs failed because
  their stalled counter `stc` is not a number (flat id, reason), and the ids that were active
  without a job hash (removed from active).
]]
local maxStalled = tonumber(ARGV[2])
if rcall("SET", K.stalledCheck, ARGV[3], "PX", ARGV[4], "NX") == false then
  return { {}, {}, {} }
end

local recovered = {}
-- Corrupted jobs failed here (flat id, reason; see worker_common.lua) and ids whose job hash
-- no longer exists.
local failed, dropped = {}, {}
local nowText = ARGV[3]
local marked = rcall("SMEMBERS", K.stalled)
if #marked > 0 then
  rcall("DEL", K.stalled)
  for _, jobId in ipairs(marked) do
    if string.sub(jobId, 1, 2) == "0:" then
      rcall("LREM", K.active, 1, jobId)
    else
      local jobKey = queueBase .. jobId
      if rcall("EXISTS", jobKey .. ":lock") == 0 and rcall("LREM", K.active, 1, jobId) > 0 then
        local attrs = rcall("HMGET", jobKey, "stc", "rjk", "name")
        local stalledCount = wInteger(attrs[1])
        if not attrs[3] and rcall("EXISTS", jobKey) == 0 then
          -- No job hash left (deleted under the worker): nothing to recover.
          dropped[#dropped + 1] = jobId
        elseif stalledCount == false then
          local reason = wNotInteger("stc", attrs[1])
          wFinalizeDeduplication(jobId, jobKey, tonumber(nowText), nowText)
          wFailCorrupted(jobId, reason, nowText, "active")
          failed[#failed + 1] = jobId
          failed[#failed + 1] = reason
        else
          stalledCount = (stalledCount or 0) + 1
          rcall("HSET", jobKey, "stc", stalledCount)
          -- Jobs produced by a scheduler are re-run rather than failed.
          local schedulerId = attrs[2]
          local scheduled = false
          if schedulerId then
            scheduled = rcall("EXISTS", K.repeatKey .. ":" .. schedulerId) == 1
              or rcall("ZSCORE", K.repeatKey, schedulerId) ~= false
          end
          if stalledCount > maxStalled and not scheduled then
            rcall("HSET", jobKey, "defa", "job stalled more than allowable limit")
          end
          local gated = queueGates(wMeta(), K.active)
          pushToWait(K.wait, K.marker, true, gated, jobId)
          emit("waiting", "jobId", jobId, "prev", "active")
          emit("stalled", "jobId", jobId)
          recovered[#recovered + 1] = jobId
        end
      end
    end
  end
end

local active = rcall("LRANGE", K.active, 0, -1)
for first = 1, #active, 5000 do
  rcall("SADD", K.stalled, unpack(active, first, math.min(first + 4999, #active)))
end
return { recovered, failed, dropped }
