--[[
  scores.lua: the numbers every script computes the same way (bullmq-protocol's score.rs is the
  Rust side, and crates/bullmq-redis/tests/lua_scores.rs checks the two agree).

  incrCounter(key) -> number
    INCR that cannot raise: a counter another client overwrote with text starts again at 1 (a
    batched script raising half-way would leave the work before it written and the caller told
    nothing was).
  priorityScore(priority, pcKey) -> number
    priority * 2^32 + (INCR pc mod 2^32): lower priority first, FIFO within one priority.
  readyAtOf(timestamp, delay) -> ms
    When a job delayed by `delay` ms from `timestamp` becomes due; a delay of 0 or less is now.
  delayedScore(delayedKey, readyAt) -> score
    readyAt * 0x1000 plus a 12-bit sequence: one more than the highest score already used for
    that millisecond (saturating at 4095), so jobs due in the same millisecond keep their
    insertion order.
  nextDelayedAt(delayedKey) -> ms or nil
    The due time of the earliest delayed job, as its score / 0x1000 (not rounded: the 12-bit
    sequence shows as a fraction, as in Node's marker), nil when nothing is delayed.
]]
local rcall = redis.call

local function incrCounter(key)
  local n = redis.pcall("INCR", key)
  if type(n) == "number" then return n end
  rcall("SET", key, "1")
  return 1
end

local function priorityScore(priority, pcKey)
  return priority * 0x100000000 + incrCounter(pcKey) % 0x100000000
end

local function readyAtOf(timestamp, delay)
  if delay > 0 then return timestamp + delay end
  return timestamp
end

local function delayedScore(delayedKey, readyAt)
  local lowest = readyAt * 0x1000
  local highest = (readyAt + 1) * 0x1000 - 1
  local last = rcall("ZREVRANGEBYSCORE", delayedKey, highest, lowest, "WITHSCORES", "LIMIT", 0, 1)
  local used = tonumber(last[2])
  if used == nil then return lowest end
  if used >= highest then return highest end
  return used + 1
end

local function nextDelayedAt(delayedKey)
  local head = rcall("ZRANGE", delayedKey, 0, 0, "WITHSCORES")
  local score = tonumber(head[2])
  if score == nil then return nil end
  return score / 0x1000
end
