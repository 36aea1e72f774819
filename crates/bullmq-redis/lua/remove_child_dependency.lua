--[[
  remove_child_dependency.lua: detaches a job from its flow parent while it is still one of the
  parent's pending children (Node `job.removeChildDependency()`).

  KEYS: 1 job hash key
  ARGV: 1 queue base ("{prefix}:{queue}:")
  Returns 0 detached (the job's `parentKey` and `parent` fields deleted; a parent left
  without pending children moved to `wait` with a `waiting` event, prev waiting-children),
  1 not a pending child (no parent, or not in its `:dependencies`), -1 no such job,
  -5 the parent does not exist. Nothing is written unless it returns 0.
]]
local rcall = redis.call
local jobKey, base = KEYS[1], ARGV[1]

if rcall("EXISTS", jobKey) ~= 1 then
  return -1
end
local parentKey = rcall("HGET", jobKey, "parentKey")
if type(parentKey) ~= "string" or parentKey == "" then
  return 1
end
if rcall("EXISTS", parentKey) ~= 1 then
  return -5
end
if rcall("SISMEMBER", parentKey .. ":dependencies", jobKey) ~= 1 then
  return 1
end
detachFromParent(jobKey, base, false)
rcall("HDEL", jobKey, "parentKey", "parent")
return 0
