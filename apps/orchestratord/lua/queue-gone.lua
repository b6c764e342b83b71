--[[
  queue-gone: which of some ids are no longer queued, and whether a drop-lru eviction took them.

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  (queue.lua)
  ARGV  [1] prefix  [2..] ids
  Reply {id, evicted 0 | 1, id, evicted, …} of the ids not queued
]]
--- @include "queue"

local out = {}
for i = 2, #ARGV do
  if redis.call('HEXISTS', KEYS[3], ARGV[i]) == 0 then
    out[#out + 1] = ARGV[i]
    out[#out + 1] = redis.call('EXISTS', P .. 'q:evicted:' .. ARGV[i])
  end
end
return out
