--[[
  queue-count-ahead: how many entries of a group a new entry of a lane would wait behind (read only).

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  [4] q:deadlines  (queue.lua)
  ARGV  [1] prefix  [2] group  [3] lane
  Reply count
]]
--- @include "queue"

local n = redis.call('ZCARD', gkey('interactive', ARGV[2]))
if ARGV[3] == 'batch' then n = n + redis.call('ZCARD', gkey('batch', ARGV[2])) end
return n
