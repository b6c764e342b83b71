--[[
  queue-requeue-front: an entry at the front of its lane (ahead of every queued one), whatever the
  capacity.

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  (queue.lua)
  ARGV  [1] prefix  [2] id  [3] lane  [4] group  [5] payload  [6] deadline ms from now ('' = none)
  Reply 1 | 0 (the id is queued already: nothing changed)
]]
--- @include "queue"

if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then return 0 end
put(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], -redis.call('INCR', P .. 'q:front'))
return 1
