--[[
  queue-add: an entry at the back of its lane, under the queue's capacity and overflow policy.

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  [4] q:deadlines  (queue.lua)
  ARGV  [1] prefix  [2] id  [3] lane ('interactive' | 'batch')  [4] group  [5] payload
        [6] deadline ms from now ('' = none)  [7] capacity  [8] policy ('reject' | 'drop-lru')
        [9] how long an eviction's marker q:evicted:<victim> is kept, ms
  Reply {'queued', position, evicted id or '', evicted json or ''} | {'full'} | {'duplicate'}
        (nothing changed unless queued)
]]
--- @include "queue"

local r = add_entry(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
if r then return r end
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then return {'duplicate'} end
return {'full'}
