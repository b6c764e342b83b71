--[[
  queue-take: the entry, removed, when it is its group's first in dispatch order (interactive lane
  first).

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  [4] q:deadlines  (queue.lua)
  ARGV  [1] prefix  [2] id
  Reply {'taken', entry json} | {'behind', the group's first id} | {'absent'}
]]
--- @include "queue"

local json = redis.call('HGET', KEYS[3], ARGV[2])
if not json then return {'absent'} end
local e = cjson.decode(json)
local first = group_head(e.group)
if first ~= ARGV[2] then return {'behind', first} end
unlink(ARGV[2], e)
return {'taken', json}
