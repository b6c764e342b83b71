--[[
  task-seize: the task's ownership from a given owner, granted while `from` holds it under that
  fence, whether or not its lease has lapsed; a new fence.

  KEYS  [1] task:<id>  [2] tasks:leases
  ARGV  [1] from owner  [2] from fence  [3] owner  [4] lease ttl ms  [5] id  [6] record ('' = keep)
  Reply {'ok', fence, owner_until} | {'fenced', owner, fence} | {'unknown'} | {'state', 'ended'}
]]
--- @include "now-ms"

local h = redis.call('HMGET', KEYS[1], 'state', 'owner', 'fence')
if not h[1] then return {'unknown'} end
if h[1] == 'ended' then return {'state', 'ended'} end
if h[2] ~= ARGV[1] or tonumber(h[3]) ~= tonumber(ARGV[2]) then return {'fenced', h[2], tonumber(h[3])} end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
local until_ = now_ms() + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'owner', ARGV[3], 'owner_until', until_)
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'record', ARGV[6]) end
redis.call('ZADD', KEYS[2], until_, ARGV[5])
return {'ok', fence, until_}
