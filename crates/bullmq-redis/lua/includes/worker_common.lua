--[[
  Helpers of the worker scripts (worker_*.lua) that rely on their common KEYS layout. Needs
  the shared includes: scores.lua, events.lua, gates.lua, markers.lua, enqueue.lua and
  job_keys.lua.

  Every worker script receives the same KEYS layout, so the helpers can name keys by role:
    KEYS[1] wait            KEYS[2] active          KEYS[3] prioritized
    KEYS[4] delayed         KEYS[5] events          KEYS[6] stalled
    KEYS[7] limiter         KEYS[8] meta            KEYS[9] pc
    KEYS[10] marker         KEYS[11] completed      KEYS[12] failed
    KEYS[13] stalled-check  KEYS[14] paused         KEYS[15] repeat
    KEYS[16] metrics:completed                      KEYS[17] metrics:failed
  ARGV[1] is always the queue base `{prefix}:{queue}:` that job ids are appended to.
]]
local rcall = redis.call

local K = {
  wait = KEYS[1], active = KEYS[2], prioritized = KEYS[3], delayed = KEYS[4],
  events = KEYS[5], stalled = KEYS[6], limiter = KEYS[7], meta = KEYS[8],
  pc = KEYS[9], marker = KEYS[10], completed = KEYS[11], failed = KEYS[12],
  stalledCheck = KEYS[13], paused = KEYS[14], repeatKey = KEYS[15],
  metricsCompleted = KEYS[16], metricsFailed = KEYS[17],
}
local queueBase = ARGV[1]

--[[
  Corrupted jobs. Redis keeps the writes of a script that raises, so a batched script that
  raised half-way would leave the jobs it had already handled in no state at all. Every script
  therefore checks the fields it computes with before its first write for a job, and a job
  that fails the check is failed on its own (`wFailCorrupted`), naming the field and the
  value, while the rest of the batch goes on. Reasons read
    corrupted job hash: atm is "abc", not an integer
  (the Rust decoder words the fields it checks the same way).
]]

-- `value` quoted for a reason, cut to 64 bytes.
local function wQuote(value)
  if #value > 64 then value = string.sub(value, 1, 64) .. "..." end
  return '"' .. string.gsub(value, '["\\]', '\\%0') .. '"'
end

-- The number in an integer field's value: nil when absent or empty, false when not a number.
local function wInteger(value)
  if not value or value == "" then return nil end
  local n = tonumber(value)
  if not n or n ~= n or n == math.huge or n == -math.huge then return false end
  return math.floor(n)
end

local function wNotInteger(field, value)
  return "corrupted job hash: " .. field .. " is " .. wQuote(value) .. ", not an integer"
end

-- Whether `s` is valid UTF-8 (job ids become keys, event fields and text in every client).
-- Callers test for a byte above 127 first, which ASCII ids (nearly all) do not have.
local function wIsUtf8(s)
  local i, n = 1, #s
  while i <= n do
    local c = string.byte(s, i)
    local len = 1
    if c >= 0xC2 and c <= 0xDF then len = 2
    elseif c >= 0xE0 and c <= 0xEF then len = 3
    elseif c >= 0xF0 and c <= 0xF4 then len = 4
    elseif c >= 0x80 then return false end
    if i + len - 1 > n then return false end
    for j = i + 1, i + len - 1 do
      local b = string.byte(s, j)
      if b < 0x80 or b > 0xBF then return false end
    end
    if len > 2 then
      local b = string.byte(s, i + 1)
      -- Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
      if (c == 0xE0 and b < 0xA0) or (c == 0xED and b > 0x9F)
        or (c == 0xF0 and b < 0x90) or (c == 0xF4 and b > 0x8F) then
        return false
      end
    end
    i = i + len
  end
  return true
end


-- The queue's meta fields the worker scripts use, read with one HMGET on first use in a call.
-- Nothing in these scripts writes them, so one read serves the whole call. `paused` and
-- `concurrency` come first, so the reply is what queueGates (includes/gates.lua) takes.
local wMetaFields = nil
local function wMeta()
  if not wMetaFields then
    wMetaFields = rcall("HMGET", K.meta, "paused", "concurrency", "max", "duration",
                        "opts.maxLenEvents")
  end
  return wMetaFields
end

-- Meta fields another client wrote that are not what BullMQ writes there (a non-negative
-- integer), flat { field, value, ... }. The scripts never raise on them: they read them as
-- Node's scripts do where Node's reading is defined (`max` not a number: no rate limit, the
-- worker's limiter included; a negative `duration`: its absolute value), and as absent where
-- Node's scripts would raise (`concurrency` or `duration` not a number, `opts.maxLenEvents`
-- not an integer: 10000). The worker reports each once (wWithInvalidMeta).
local W_META_NUMBERS = { {2, "concurrency"}, {3, "max"}, {4, "duration"},
                         {5, "opts.maxLenEvents"} }
local function wInvalidMeta()
  local meta = wMeta()
  local out = {}
  for _, f in ipairs(W_META_NUMBERS) do
    local value = meta[f[1]]
    if value and not string.match(value, "^%d+$") then
      out[#out + 1] = f[2]
      out[#out + 1] = value
    end
  end
  return out
end

-- A fetch reply (includes/worker_fetch.lua) completed to its 8 parts, with wInvalidMeta()
-- as a 9th.
local function wWithInvalidMeta(fetched)
  for i = #fetched + 1, 8 do fetched[i] = {} end
  fetched[9] = wInvalidMeta()
  return fetched
end

-- Appends an event to the queue's events stream (includes/events.lua): the first event of a
-- call trims the stream to about `opts.maxLenEvents` entries, as Node's XADD with MAXLEN ~
-- does, with the cap taken from the meta read above.
local emit = eventEmitter(K.events, function() return maxEventsOrDefault(K.meta, wMeta()[5]) end)

-- Fails a job whose hash is corrupted, on its own: into `failed` with `reason`, and a `failed`
-- event (`prev` is the state it was taken from). The caller has taken it out of its list and
-- released its deduplication window (wFinalizeDeduplication, includes/worker_dedup.lua).
-- Nothing here can raise, whatever the hash holds; retention and flow bookkeeping are skipped,
-- so the job stays for an operator to inspect.
local function wFailCorrupted(jobId, reason, nowText, prev)
  rcall("ZADD", K.failed, nowText, jobId)
  rcall("HSET", queueBase .. jobId, "failedReason", reason, "finishedOn", nowText)
  emit("failed", "jobId", jobId, "failedReason", reason, "prev", prev)
end

-- Puts a job id back in the ready structures: prioritized zset when it has a priority, else the
-- wait list (`lifo`: at the front of the line). `blocked` is queueGates' verdict.
local function wEnqueueReady(jobId, lifo, blocked)
  local priority = tonumber(rcall("HGET", queueBase .. jobId, "priority")) or 0
  if priority > 0 then
    pushToPrioritized(K.prioritized, K.pc, K.marker, priority, blocked, jobId)
  else
    pushToWait(K.wait, K.marker, lifo, blocked, jobId)
  end
end

-- Moves due delayed jobs (at most 1000 per call) to wait / prioritized with a `waiting` event.
local function wPromoteDelayed(now, gated)
  -- Arguments as text: Redis formats each Lua number argument with a slow "%.17g", and this
  -- runs on every call.
  local due = rcall("ZRANGEBYSCORE", K.delayed, "0", string.format("%d", (now + 1) * 0x1000 - 1),
                    "LIMIT", "0", "1000")
  if #due == 0 then return end
  rcall("ZREM", K.delayed, unpack(due))
  for _, jobId in ipairs(due) do
    local jobKey = queueBase .. jobId
    local priority = tonumber(rcall("HGET", jobKey, "priority")) or 0
    if priority > 0 then
      rcall("ZADD", K.prioritized, priorityScore(priority, K.pc), jobId)
    else
      rcall("LPUSH", K.wait, jobId)
    end
    emit("waiting", "jobId", jobId, "prev", "delayed")
    rcall("HSET", jobKey, "delay", 0)
  end
  -- One marker for all of them.
  addBaseMarker(K.marker, gated)
end
