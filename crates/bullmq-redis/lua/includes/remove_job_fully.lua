--[[
  remove_job_fully.lua: removing a job and everything that points at it.
  Needs scores.lua, events.lua, gates.lua, markers.lua, enqueue.lua, job_keys.lua.

  splitJobKey(jobKey) -> jobId, queueBase
    "bull:q:42" -> "42", "bull:q:".
  releaseDeduplication(base, jobId, deduplicationId)
    Deletes `de:{id}` (and the pending `dn:{id}` payload) when it still points at this job.
  detachFromParent(jobKey, base, hard)
    When the job hash names a `parentKey`, drops the job from the parent's `:dependencies`. If
    that was the parent's last pending child and the parent sits in `waiting-children`, the
    parent is either deleted too (hard, parent in the same queue: drain/clean/obliterate) or
    moved to `wait` with a `waiting` event (jobId, prev = waiting-children).
  purgeJob(base, jobId, hard)
    detachFromParent + releaseDeduplication + removeJobKeys, for callers that remove the id from
    its state list/zset themselves (drain, clean, obliterate, trimming finished jobs).
  removeFromAnyState(base, jobId) -> previous state name ("unknown" when in none)
  isLockedDeep(base, jobId, withChildren) -> boolean
    True when the job (or, with children, any pending child, recursively) holds a `:lock`.
  removeJobEverywhere(base, jobId, withChildren) -> previous state name
    Detaches the job from its parent, then (with children) removes the job's children
    (pending, processed, failed, ignored), each in its own queue, then removes the job from its
    state, its keys and its dedup key and emits `removed` (jobId, prev). Each child detaches
    itself too, as in Node: a parent whose last pending child goes moves to `wait` (with its
    `waiting` event) just before it is removed itself, so its `removed` says prev `wait`.
]]
local rcall = redis.call

local function splitJobKey(jobKey)
  local jobId = string.match(jobKey, ".*:(.*)")
  return jobId, string.sub(jobKey, 1, #jobKey - #jobId)
end

local function releaseDeduplication(base, jobId, deduplicationId)
  if deduplicationId then
    local deduplicationKey = base .. "de:" .. deduplicationId
    if rcall("GET", deduplicationKey) == jobId then
      rcall("DEL", deduplicationKey, base .. "dn:" .. deduplicationId)
    end
  end
end

local detachFromParent
detachFromParent = function(jobKey, base, hard)
  local parentKey = rcall("HGET", jobKey, "parentKey")
  if type(parentKey) ~= "string" or parentKey == "" then
    return
  end
  if rcall("SREM", parentKey .. ":dependencies", jobKey) == 0 then
    return
  end
  if rcall("SCARD", parentKey .. ":dependencies") > 0 then
    return
  end
  local parentId, parentBase = splitJobKey(parentKey)
  if rcall("ZREM", parentBase .. "waiting-children", parentId) ~= 1 then
    return
  end
  if hard and parentBase == base then
    local parentDeduplicationId = rcall("HGET", parentKey, "deid")
    detachFromParent(parentKey, base, hard)
    releaseDeduplication(base, parentId, parentDeduplicationId)
    removeJobKeys(parentKey)
  else
    local pausedOrMaxed = isPausedOrMaxed(parentBase .. "meta", parentBase .. "active")
    pushToWait(parentBase .. "wait", parentBase .. "marker", true, pausedOrMaxed, parentId)
    if not hard then
      emitEvent(parentBase .. "events", getMaxEvents(parentBase .. "meta"), "waiting",
        "jobId", parentId, "prev", "waiting-children")
    end
  end
end

local function purgeJob(base, jobId, hard)
  local jobKey = base .. jobId
  detachFromParent(jobKey, base, hard)
  releaseDeduplication(base, jobId, rcall("HGET", jobKey, "deid"))
  removeJobKeys(jobKey)
end

local function removeFromAnyState(base, jobId)
  -- ZSCOREs first: O(1), and most removed jobs are finished or scheduled.
  for _, state in ipairs({"completed", "waiting-children", "delayed", "failed", "prioritized"}) do
    if rcall("ZREM", base .. state, jobId) == 1 then
      return state
    end
  end
  for _, state in ipairs({"wait", "paused", "active"}) do
    if rcall("LREM", base .. state, 1, jobId) == 1 then
      return state
    end
  end
  return "unknown"
end

-- Every job key a parent references as a child, whatever happened to that child.
local function childKeysOf(jobKey)
  local children = rcall("SMEMBERS", jobKey .. ":dependencies")
  for _, hashKey in ipairs({jobKey .. ":processed", jobKey .. ":failed"}) do
    local entries = rcall("HKEYS", hashKey)
    for i = 1, #entries do
      children[#children + 1] = entries[i]
    end
  end
  local ignored = rcall("ZRANGE", jobKey .. ":unsuccessful", 0, -1)
  for i = 1, #ignored do
    children[#children + 1] = ignored[i]
  end
  return children
end

local isLockedDeep
isLockedDeep = function(base, jobId, withChildren)
  local jobKey = base .. jobId
  if rcall("EXISTS", jobKey .. ":lock") == 1 then
    return true
  end
  if withChildren then
    local pending = rcall("SMEMBERS", jobKey .. ":dependencies")
    for _, childKey in ipairs(pending) do
      local childId, childBase = splitJobKey(childKey)
      if isLockedDeep(childBase, childId, true) then
        return true
      end
    end
  end
  return false
end

local removeJobEverywhere
removeJobEverywhere = function(base, jobId, withChildren)
  local jobKey = base .. jobId
  detachFromParent(jobKey, base, false)
  if withChildren then
    for _, childKey in ipairs(childKeysOf(jobKey)) do
      local childId, childBase = splitJobKey(childKey)
      removeJobEverywhere(childBase, childId, true)
    end
  end
  local prev = removeFromAnyState(base, jobId)
  releaseDeduplication(base, jobId, rcall("HGET", jobKey, "deid"))
  if removeJobKeys(jobKey) > 0 then
    emitEvent(base .. "events", getMaxEvents(base .. "meta"), "removed", "jobId", jobId,
      "prev", prev)
  end
  return prev
end
