--[[
  retry_parent.lua: a retried flow child becomes a pending dependency of its parent again.

  backToParentDependencies(jobKey, parentKey, prev)
    `parentKey` is the child's `parentKey` field (false when it has none); `prev` the state it
    was retried from (`failed` / `completed`). Only a parent that still exists and still lists
    the child among its finished children (`:unsuccessful` or `:failed` for a failed child,
    `:processed` for a completed one) gets it back in `:dependencies`; a parent that has moved
    on is left where it is (it is not put back in waiting-children).
]]
local rcall = redis.call

local function backToParentDependencies(jobKey, parentKey, prev)
  if not parentKey or rcall("EXISTS", parentKey) ~= 1 then return end
  local wasFinished
  if prev == "failed" then
    wasFinished = rcall("ZREM", parentKey .. ":unsuccessful", jobKey) == 1
      or rcall("HDEL", parentKey .. ":failed", jobKey) == 1
  else
    wasFinished = rcall("HDEL", parentKey .. ":processed", jobKey) == 1
  end
  if wasFinished then rcall("SADD", parentKey .. ":dependencies", jobKey) end
end
