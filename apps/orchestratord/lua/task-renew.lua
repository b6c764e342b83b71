--[[
  task-renew: the owner's lease, extended from now (queued or running, under the caller's fence).

  KEYS  [1] task:<id>  [2] tasks:leases
  ARGV  [1] fence  [2] lease ttl ms  [3] id
  Reply {'ok', record hash (flat)} | {'unknown'} | {'fenced', owner, fence} | {'state', state}
]]
--- @include "task-record"

local now = now_ms()
local refused = record_check(KEYS[1], ARGV[1], {'queued', 'running'}, now)
if refused then return refused end
redis.call('HSET', KEYS[1], 'owner_until', now + tonumber(ARGV[2]))
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
return {'ok', redis.call('HGETALL', KEYS[1])}
