--[[
  add_flow.lua: adds a whole flow (a tree of jobs across the queues of one prefix or more) in
  one atomic call, as Node's FlowProducer does with one MULTI of add scripts followed by one
  parent release per parent (6.7's deferred release).

  KEYS: 1 the first record's queue `meta` key, read by nobody: it routes the call to the slot
  of the flow (the producer refuses a flow whose keys span slots); every key is built from the
  queue bases of the records (declaring them all for Redis Cluster is a later issue).
  ARGV: 1 now (ms, for parents released at the end), then one record of 10 arguments per job,
        parents before their children:
        queue base (`{prefix}:{queue}:`), "1" when the job has children in this flow (it waits
        in `waiting-children`) else "", custom id or "", name, data JSON, opts JSON (stored
        verbatim), timestamp (ms), parent key or "", parent JSON or "", parent dependencies
        key or "".
  Returns one job id per record, or, when the flow is refused and nothing was written,
  {code, record index (0-based), key, key}:
    -5 the parent named by a record neither exists nor is added earlier in the flow
       {-5, index, parent key};
    -7 a record's job exists as the child of another parent that still exists
       {-7, index, job key, existing parent key}.

  Validate, then write: every opts JSON and parent JSON is decoded and every refusal checked
  before the first write. Then each record is added:
    - an id that exists: the job is left as it is; with a parent it is attached to it (a
      completed job is recorded in the parent's `:processed` with its return value, any other
      joins the parent's `:dependencies`; `parentKey`/`parent` are set) and `duplicated` is
      emitted, as Node does;
    - a job with children: stored (name, data, opts, timestamp, delay, priority, parentKey /
      parent), scored by its timestamp in `waiting-children`, events `added` and
      `waiting-children`, and registered in its own parent's `:dependencies`;
    - any other job exactly as add_job.lua adds it (delay, priority, lifo, deduplication).
  Last, every parent named by a record (in the order first met) that has no pending child is
  released from `waiting-children` as a worker releases it (a parent whose children all
  already existed, completed, goes on at once).

  Cost: one pass over the records for the checks and one for the writes; each parent's JSON is
  decoded once however many children name it; ids are pushed to `wait` in chunks (see
  add_job_core.lua), so 10 000 children of one parent stay linear and under Lua's C stack.
]]
local STRIDE = 10
local now = tonumber(ARGV[1])
local records = (#ARGV - 1) / STRIDE

-- Validation: no write before the last check.
local decoded = {}
local parentsOrder = {}
local parents = {}
local inFlow = {}
for n = 1, records do
  local i = 2 + (n - 1) * STRIDE
  local base, customId, parentKey = ARGV[i], ARGV[i + 2], ARGV[i + 7]
  decoded[n] = cjson.decode(ARGV[i + 5])
  if parentKey ~= "" then
    if not inFlow[parentKey] and rcall("EXISTS", parentKey) ~= 1 then
      return {-5, n - 1, parentKey}
    end
    if customId ~= "" then
      local jobKey = base .. customId
      local existing = rcall("HGET", jobKey, "parentKey")
      if existing and existing ~= parentKey and rcall("EXISTS", existing) == 1 then
        return {-7, n - 1, jobKey, existing}
      end
    end
    if not parents[parentKey] then
      local parent = cjson.decode(ARGV[i + 8])
      local id, queueKey = parent["id"], parent["queueKey"]
      -- A parent JSON without id or queue (never ours) is still stored, but not released.
      local valid = (type(id) == "string" or type(id) == "number") and type(queueKey) == "string"
      parents[parentKey] = {key = parentKey, id = valid and tostring(id), queueKey = queueKey,
        valid = valid}
      parentsOrder[#parentsOrder + 1] = parents[parentKey]
    end
  end
  if customId ~= "" then
    inFlow[base .. customId] = true
  end
end

-- One add context per queue, keyed by its base.
local contexts = {}
local contextsOrder = {}
local function contextOf(base)
  local ctx = contexts[base]
  if ctx == nil then
    local q = string.sub(base, 1, -2)
    local keys = {wait = q .. ":wait", meta = q .. ":meta", id = q .. ":id",
      delayed = q .. ":delayed", prioritized = q .. ":prioritized", pc = q .. ":pc",
      active = q .. ":active", events = q .. ":events", marker = q .. ":marker"}
    ctx = newAddBatch(keys, base, 0)
    -- Node's flow adds store `opts.maxLenEvents` on a fresh meta but not `version` (a Node
    -- FlowProducer never opens a Queue), so the length is read here as they read it.
    ctx.maxEvents = tonumber(maxEventsOrDefault(keys.meta, rcall("HGET", keys.meta,
      "opts.maxLenEvents"))) or 10000
    ctx.queueKey = q
    contexts[base] = ctx
    contextsOrder[#contextsOrder + 1] = ctx
  end
  return ctx
end

-- A record whose job exists (checked above: it has no other live parent).
local function attachExisting(ctx, jobId, parentKey, parentJson, dependenciesKey)
  nextJobCounter(ctx)
  local maxEvents = batchMaxEvents(ctx)
  local jobKey = ctx.base .. jobId
  if parentKey ~= "" then
    if rcall("ZSCORE", ctx.queueKey .. ":completed", jobId) then
      -- A completed job without a return value (another client's) counts as null.
      local returnvalue = rcall("HGET", jobKey, "returnvalue") or "null"
      rcall("HSET", parentKey .. ":processed", jobKey, returnvalue)
    elseif dependenciesKey ~= "" then
      rcall("SADD", dependenciesKey, jobKey)
    end
    rcall("HSET", jobKey, "parentKey", parentKey, "parent", parentJson)
  end
  emitEvent(ctx.keys.events, maxEvents, "duplicated", "jobId", jobId)
  return jobId
end

-- A new job with children in this flow: it waits for them in `waiting-children`.
local function addWaitingParent(ctx, customId, name, data, optsJson, opts, timestamp, parentKey,
                                parentJson, dependenciesKey)
  local counter = nextJobCounter(ctx)
  batchMaxEvents(ctx)
  local jobId = customId
  if jobId == "" then
    jobId = tostring(counter)
  end
  local jobKey = ctx.base .. jobId
  local delay = tonumber(optionValue(opts, "delay")) or 0
  local priority = tonumber(optionValue(opts, "priority")) or 0
  local fields = {"name", name, "data", data, "opts", optsJson, "timestamp", timestamp,
    "delay", delay, "priority", priority}
  if parentKey ~= "" then
    fields[#fields + 1] = "parentKey"
    fields[#fields + 1] = parentKey
    fields[#fields + 1] = "parent"
    fields[#fields + 1] = parentJson
  end
  rcall("HSET", jobKey, unpack(fields))
  -- Trimmed once in finishAddBatch.
  ctx.trim = true
  local events = ctx.keys.events
  rcall("XADD", events, "*", "event", "added", "jobId", jobId, "name", name)
  rcall("ZADD", ctx.queueKey .. ":waiting-children", timestamp, jobId)
  rcall("XADD", events, "*", "event", "waiting-children", "jobId", jobId)
  if dependenciesKey ~= "" then
    rcall("SADD", dependenciesKey, jobKey)
  end
  return jobId
end

local results = {}
for n = 1, records do
  local i = 2 + (n - 1) * STRIDE
  local base, waiting, customId = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local ctx = contextOf(base)
  if customId ~= "" and rcall("EXISTS", base .. customId) == 1 then
    results[n] = attachExisting(ctx, customId, ARGV[i + 7], ARGV[i + 8], ARGV[i + 9])
  elseif waiting == "1" then
    results[n] = addWaitingParent(ctx, customId, ARGV[i + 3], ARGV[i + 4], ARGV[i + 5],
      decoded[n], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9])
  else
    -- The parent exists (checked above, or added earlier in this loop), so this cannot be -5.
    results[n] = addJob(ctx, customId, ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], decoded[n],
      ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9], "")
  end
end
-- The deferred wait pushes first: a released parent is pushed at the other end (RPUSH) after
-- them, as after Node's adds.
for _, ctx in ipairs(contextsOrder) do
  finishAddBatch(ctx)
end
for _, parent in ipairs(parentsOrder) do
  if parent.valid and rcall("SCARD", parent.key .. ":dependencies") == 0 then
    wReleaseParent(parent.queueKey, parent.key, parent.id, now)
  end
end
return results
