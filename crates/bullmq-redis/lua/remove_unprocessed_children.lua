--[[
  remove_unprocessed_children.lua: removes a flow parent's pending children (its
  `:dependencies`), depth first through their own pending children (Node
  `job.removeUnprocessedChildren()`).

  KEYS: 1 parent job hash key
  ARGV: none
  Returns the keys of the jobs removed, each after its own removed children.
  A child that holds a lock, or sits in its queue's `failed`, is kept (with its subtree).
  Every other one is detached from its parent (a parent left without pending children moves
  to `wait` with a `waiting` event, prev waiting-children), loses its own pending children the
  same way, then leaves its state with its keys and its deduplication key, emitting `removed`
  (jobId, prev) in its queue.
]]
local rcall = redis.call

local removePendingChildren
local removed = {}

local function removeUnprocessed(childKey)
  local childId, childBase = splitJobKey(childKey)
  if rcall("EXISTS", childKey .. ":lock") == 1 then
    return
  end
  if rcall("ZSCORE", childBase .. "failed", childId) then
    return
  end
  detachFromParent(childKey, childBase, false)
  removePendingChildren(childKey)
  local prev = removeFromAnyState(childBase, childId)
  releaseDeduplication(childBase, childId, rcall("HGET", childKey, "deid"))
  if removeJobKeys(childKey) > 0 then
    emitEvent(childBase .. "events", getMaxEvents(childBase .. "meta"), "removed",
      "jobId", childId, "prev", prev)
    removed[#removed + 1] = childKey
  end
end

removePendingChildren = function(jobKey)
  local pending = rcall("SMEMBERS", jobKey .. ":dependencies")
  for _, childKey in ipairs(pending) do
    removeUnprocessed(childKey)
  end
end

removePendingChildren(KEYS[1])
return removed
