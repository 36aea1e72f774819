--[[
  emit_event.lua: appending to the queue's events stream.

  emitEvent(eventsKey, maxEvents, name, field1, value1, ...)
    XADD with an approximate MAXLEN so the stream stays near `maxEvents` entries. The fields
    after `name` are written in the given order, which is the order Node consumers rely on
    (e.g. `jobId` first).
]]
local rcall = redis.call

local function emitEvent(eventsKey, maxEvents, name, ...)
  return rcall("XADD", eventsKey, "MAXLEN", "~", maxEvents, "*", "event", name, ...)
end
