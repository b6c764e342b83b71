--[[
  queue-position: an entry's place in dispatch order (read only).

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  [4] q:deadlines  (queue.lua)
  ARGV  [1] prefix  [2] id
  Reply 0-based position | -1 (not queued)
]]
--- @include "queue"

local json = redis.call('HGET', KEYS[3], ARGV[2])
if not json then return -1 end
local lane = cjson.decode(json).lane
local rank = redis.call('ZRANK', LANE[lane], ARGV[2])
if lane == 'batch' then rank = rank + redis.call('ZCARD', KEYS[1]) end
return rank
