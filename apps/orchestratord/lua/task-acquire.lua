--[[
  task-acquire: the task's ownership, granted when no live owner holds it or the caller does;
  always a new fence.

  KEYS  [1] task:<id>  [2] tasks:leases
  ARGV  [1] owner  [2] lease ttl ms  [3] id  [4] record ('' = keep)
  Reply {'ok', fence, owner_until} | {'held', owner, owner_until} | {'unknown'} | {'state', 'ended'}
]]
--- @include "now-ms"

local h = redis.call('HMGET', KEYS[1], 'state', 'owner', 'owner_until')
if not h[1] then return {'unknown'} end
if h[1] == 'ended' then return {'state', 'ended'} end
local now = now_ms()
if tonumber(h[3]) > now and h[2] ~= ARGV[1] then return {'held', h[2], tonumber(h[3])} end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
local until_ = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'owner_until', until_)
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'record', ARGV[4]) end
redis.call('ZADD', KEYS[2], until_, ARGV[3])
return {'ok', fence, until_}
