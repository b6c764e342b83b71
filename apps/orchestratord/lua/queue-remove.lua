--[[
  queue-remove: an entry out of the queue, wherever it is.

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  (queue.lua)
  ARGV  [1] prefix  [2] id
  Reply the removed entry's json | nil (not queued)
]]
--- @include "queue"

local json = redis.call('HGET', KEYS[3], ARGV[2])
if not json then return false end
unlink(ARGV[2], cjson.decode(json))
return json
