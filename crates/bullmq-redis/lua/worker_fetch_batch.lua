--[[
  Fetch a batch of jobs for one worker (see includes/worker_fetch.lua for the reply).

  KEYS: the worker layout described in includes/worker_common.lua.
  ARGV[1] queue base, ARGV[2] JSON fetch request (fields listed in includes/worker_fetch.lua).
  Returns the reply of includes/worker_fetch.lua with a 9th part: the meta fields another
  client wrote that are not numbers BullMQ writes (includes/worker_common.lua wInvalidMeta).
]]
return wWithInvalidMeta(wFetch(cjson.decode(ARGV[2])))
