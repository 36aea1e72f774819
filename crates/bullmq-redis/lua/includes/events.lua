--[[
  events.lua: the queue's events stream and the cap on its length.

  maxEventsOrDefault(metaKey, configured) -> cap
    `configured` is meta `opts.maxLenEvents` as the caller read it (false when unset), so a
    script that reads meta anyway passes what it read instead of reading it again. Unset: the
    BullMQ default 10000 is written back, so every client trims to the same length. A value
    that is not a non-negative integer (another client's garbage, on which Node's XADD raises)
    counts as 10000 and is left as it is.
  getMaxEvents(metaKey) -> number
    For scripts that read nothing else of meta: reads `opts.maxLenEvents`, a value that is not
    a number counting as 10000. A queue whose meta has never been written also gets `version`
    (HSETNX, never overwritten), so dashboards that require `meta.version` recognise queues
    created by a script before any Queue handle wrote its meta.
  emitEvent(eventsKey, maxEvents, name, field1, value1, ...)
    XADD with an approximate MAXLEN so the stream stays near `maxEvents` entries. The fields
    after `name` are written in the given order, which is the order Node consumers rely on
    (e.g. `jobId` first).
  eventEmitter(eventsKey, maxEventsOf) -> emit(name, field1, value1, ...)
    For scripts that may emit many events in one call: only the first event of the call carries
    the MAXLEN (`maxEventsOf()` is asked then, and only then), later ones are plain XADDs. A
    call adding no event adds nothing to trim, and a separate XTRIM per call would cost Redis a
    command dispatch every time.
]]
local rcall = redis.call

-- A stored cap XADD MAXLEN takes (a non-negative integer), else nil.
local function validMaxEvents(configured)
  local n = tonumber(configured)
  if n and n >= 0 and n == math.floor(n) and n < 2^53 then return n end
  return nil
end

local function maxEventsOrDefault(metaKey, configured)
  -- Another client's value that is not a cap (Node's XADD would raise on it) reads as the
  -- default, and is left as it is.
  if configured then return validMaxEvents(configured) or 10000 end
  rcall("HSET", metaKey, "opts.maxLenEvents", 10000)
  return 10000
end

local function getMaxEvents(metaKey)
  local configured = rcall("HGET", metaKey, "opts.maxLenEvents")
  local maxEvents = maxEventsOrDefault(metaKey, configured)
  if not configured then
    rcall("HSETNX", metaKey, "version", "bullmq:6.7.0")
  end
  return validMaxEvents(maxEvents) or 10000
end

local function emitEvent(eventsKey, maxEvents, name, ...)
  return rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", name, ...)
end

local function eventEmitter(eventsKey, maxEventsOf)
  local capped = false
  return function(name, ...)
    if capped then return rcall("XADD", eventsKey, "*", "event", name, ...) end
    capped = true
    return rcall("XADD", eventsKey, "MAXLEN", "~", maxEventsOf(), "*", "event", name, ...)
  end
end
