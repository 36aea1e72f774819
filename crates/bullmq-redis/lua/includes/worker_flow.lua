--[[
  Parent/child (flow) bookkeeping when a child job finishes (needs worker_common.lua).

  A child's hash holds `parentKey` (the parent's job key) and `parent` (JSON with the parent's
  `id`, `queueKey` and failure policy flags `fpof` / `cpof` / `idof` / `rdof`). The parent waits
  in its queue's `waiting-children` zset while its `:dependencies` set is not empty. The parent
  may live in another queue, whose keys are derived from `queueKey` as other clients do.
]]

-- Moves a parent out of `waiting-children` into delayed / prioritized / wait.
local function wReleaseParent(parentQueueKey, parentKey, parentId, now)
  if rcall("EXISTS", parentKey) == 0 then return end
  local waitingChildren = parentQueueKey .. ":waiting-children"
  if not rcall("ZSCORE", waitingChildren, parentId) then return end
  rcall("ZREM", waitingChildren, parentId)
  local events = parentQueueKey .. ":events"
  local marker = parentQueueKey .. ":marker"
  local attrs = rcall("HMGET", parentKey, "priority", "delay")
  local priority = tonumber(attrs[1]) or 0
  local delay = tonumber(attrs[2]) or 0
  if delay > 0 then
    local readyAt = now + delay
    local delayedKey = parentQueueKey .. ":delayed"
    -- Without a sequence (no lookup of the millisecond's bucket), as Node releases a parent.
    rcall("ZADD", delayedKey, readyAt * 0x1000, parentId)
    rcall("XADD", events, "*", "event", "delayed", "jobId", parentId, "delay", readyAt)
    addDelayMarker(marker, delayedKey)
    return
  end
  local gated = isPausedOrMaxed(parentQueueKey .. ":meta", parentQueueKey .. ":active")
  if priority > 0 then
    pushToPrioritized(parentQueueKey .. ":prioritized", parentQueueKey .. ":pc", marker, priority,
      gated, parentId)
  else
    pushToWait(parentQueueKey .. ":wait", marker, true, gated, parentId)
  end
  rcall("XADD", events, "*", "event", "waiting", "jobId", parentId, "prev", "waiting-children")
end

-- The parent of the job at `jobKey`, from its `parent` JSON or `parentKey`: nil when it has
-- none, else { id, key, queueKey, policy }. Returns nil and a reason when the fields are
-- corrupted (checked before the caller writes anything, see worker_common.lua).
local function wParentOf(jobKey)
  local attrs = rcall("HMGET", jobKey, "parentKey", "parent")
  local parentKey, raw = attrs[1], attrs[2]
  if raw then
    local ok, parent = pcall(cjson.decode, raw)
    local id = ok and type(parent) == "table" and parent["id"]
    local queueKey = id and parent["queueKey"]
    if (type(id) ~= "string" and type(id) ~= "number") or type(queueKey) ~= "string" then
      return nil, "corrupted job hash: parent is " .. wQuote(raw) .. ", not a parent reference"
    end
    id = tostring(id)
    return { id = id, key = queueKey .. ":" .. id, queueKey = queueKey, policy = parent }
  end
  if parentKey and parentKey ~= "" then
    local parentId = string.match(parentKey, ".*:(.*)")
    if not parentId or parentId == "" then
      return nil, "corrupted job hash: parentKey is " .. wQuote(parentKey) .. ", not a job key"
    end
    return { id = parentId, key = parentKey,
             queueKey = string.sub(parentKey, 1, #parentKey - #parentId - 1), policy = {} }
  end
  return nil
end

-- A child (of `parent`, from wParentOf) completed with `returnvalue`: record it in the
-- parent's `:processed` hash and release the parent when it has no pending children left.
local function wChildCompleted(parent, jobKey, returnvalue, now)
  local parentId, parentKey, parentQueueKey = parent.id, parent.key, parent.queueKey
  local dependencies = parentKey .. ":dependencies"
  if rcall("SREM", dependencies, jobKey) == 1 then
    rcall("HSET", parentKey .. ":processed", jobKey, returnvalue)
    if rcall("SCARD", dependencies) == 0 then
      wReleaseParent(parentQueueKey, parentKey, parentId, now)
    end
  end
end

-- A child (of `parent`, from wParentOf) failed for good: apply the parent's failure policy.
--   fpof: the parent fails too (deferred failure "child <key> failed", released to run it)
--   cpof: the parent continues (failure recorded in `:failed`), released at once
--   idof: the failure is recorded in `:failed` and ignored; rdof: the dependency is dropped
local function wChildFailed(parent, jobKey, reason, now)
  local parentId, parentKey, parentQueueKey = parent.id, parent.key, parent.queueKey
  local policy = parent.policy
  local dependencies = parentKey .. ":dependencies"
  if policy["fpof"] then
    if rcall("SREM", dependencies, jobKey) == 1 then
      rcall("ZADD", parentKey .. ":unsuccessful", now, jobKey)
      if rcall("EXISTS", parentKey) == 1 then
        local failure = "child " .. jobKey .. " failed"
        local waitingChildren = parentQueueKey .. ":waiting-children"
        local delayedKey = parentQueueKey .. ":delayed"
        if rcall("ZSCORE", delayedKey, parentId) then
          -- A delayed parent is failed now rather than after its delay.
          rcall("ZREM", delayedKey, parentId)
          rcall("HSET", parentKey, "delay", 0)
          rcall("ZADD", waitingChildren, now, parentId)
        end
        if rcall("ZSCORE", waitingChildren, parentId) then
          rcall("HSET", parentKey, "defa", failure)
          wReleaseParent(parentQueueKey, parentKey, parentId, now)
        elseif not rcall("ZSCORE", parentQueueKey .. ":failed", parentId) then
          rcall("HSET", parentKey, "defa", failure)
        end
      end
    end
  elseif policy["cpof"] then
    if rcall("SREM", dependencies, jobKey) == 1 then
      rcall("HSET", parentKey .. ":failed", jobKey, reason)
      wReleaseParent(parentQueueKey, parentKey, parentId, now)
    end
  elseif policy["idof"] or policy["rdof"] then
    if rcall("SREM", dependencies, jobKey) == 1 then
      if rcall("SCARD", dependencies) == 0 then
        wReleaseParent(parentQueueKey, parentKey, parentId, now)
      end
      if policy["idof"] then
        rcall("HSET", parentKey .. ":failed", jobKey, reason)
      end
    end
  end
end
