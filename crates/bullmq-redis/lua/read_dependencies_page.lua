--[[
  read_dependencies_page.lua: one page of a flow parent's children of one kind (Node's
  `getDependencies` with paging options).

  KEYS: 1 the parent's `:processed` (hash), `:dependencies` (set), `:failed` (hash) or
        `:unsuccessful` (zset) key
  ARGV: 1 kind ("hash", "set" or "zset"), 2 cursor, 3 count
  Returns {next cursor, flat entries}: HSCAN / SSCAN pages (cursor 0 when done, entries
  `key, value` for a hash), or for the zset the members ranked cursor .. cursor + count - 1
  with next cursor cursor + count (0 when the page was the last).
]]
local rcall = redis.call
local cursor, count = ARGV[2], tonumber(ARGV[3])
if ARGV[1] == "hash" then
  return rcall("HSCAN", KEYS[1], cursor, "COUNT", count)
elseif ARGV[1] == "set" then
  return rcall("SSCAN", KEYS[1], cursor, "COUNT", count)
end
local first = tonumber(cursor)
local members = rcall("ZRANGE", KEYS[1], first, first + count - 1)
local next = first + count
if next >= rcall("ZCARD", KEYS[1]) then next = 0 end
return {tostring(next), members}
