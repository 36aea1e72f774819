--[[
  obliterate.lua: deletes a paused queue with all its jobs, a batch per call.

  KEYS: 1 meta, 2 queue base
  ARGV: 1 max jobs to delete in this call, 2 "1" to proceed even with active jobs
  Returns 0 when the queue is gone, 1 when more remains (call again), -1 when the queue is not
  paused, -2 when jobs are active and force was not given.
  Active jobs lose their locks: a worker still processing one finds its lock gone. (Only
  active jobs hold a `:lock`, and removeJobKeys leaves it, so it is deleted here, as Node's
  obliterate does.)
]]
local rcall = redis.call
local metaKey, base = KEYS[1], KEYS[2]
local budget = tonumber(ARGV[1])
local force = ARGV[2] == "1"

if rcall("HEXISTS", metaKey, "paused") ~= 1 then
  return -1
end
local activeKey = base .. "active"
if not force and rcall("LLEN", activeKey) > 0 then
  return -2
end

local function purgeIds(ids)
  for _, jobId in ipairs(ids) do
    purgeJob(base, jobId, true)
  end
  budget = budget - #ids
end

local function obliterateList(key, withLocks)
  local ids = rcall("LRANGE", key, 0, budget - 1)
  if withLocks then
    forEachBatch(ids, 5000, function(from, to)
      local locks = {}
      for i = from, to do
        locks[#locks + 1] = base .. ids[i] .. ":lock"
      end
      rcall("DEL", unpack(locks))
    end)
  end
  purgeIds(ids)
  rcall("LTRIM", key, #ids, -1)
end

local function obliterateZset(key)
  local ids = rcall("ZRANGE", key, 0, budget - 1)
  purgeIds(ids)
  zremAll(key, ids)
end

local steps = {
  function() obliterateList(activeKey, true) end,
  function() obliterateZset(base .. "delayed") end,
  function()
    local schedulers = rcall("ZRANGE", base .. "repeat", 0, budget - 1)
    for _, schedulerId in ipairs(schedulers) do
      rcall("DEL", base .. "repeat:" .. schedulerId)
    end
    zremAll(base .. "repeat", schedulers)
    budget = budget - #schedulers
  end,
  function() obliterateZset(base .. "completed") end,
  function() obliterateList(base .. "wait") end,
  function() obliterateList(base .. "paused") end,
  function() obliterateZset(base .. "prioritized") end,
  function() obliterateZset(base .. "failed") end,
  function() obliterateZset(base .. "waiting-children") end,
}
for _, step in ipairs(steps) do
  step()
  if budget <= 0 then
    return 1
  end
end

rcall("DEL", base .. "events", base .. "delay", base .. "stalled-check", base .. "stalled",
  base .. "id", base .. "pc", base .. "marker", base .. "limiter", base .. "meta",
  base .. "metrics:completed", base .. "metrics:completed:data", base .. "metrics:failed",
  base .. "metrics:failed:data")
return 0
