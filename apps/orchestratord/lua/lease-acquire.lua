--[[
  lease-acquire: a slot lease on a pool, granted while fewer than `slots` live leases are held (a
  lease already held is renewed). A new lease is signalled on the signals channel:
  `lease\t<pool key>\t<held>\t<lease id>\t+`.

  KEYS  [1] leases:<pool key>  (slot-leases.lua)
  ARGV  [1] lease id  [2] slots  [3] ttl ms  [4] signals channel  [5] pool key
  Reply {granted 0 | 1, expires_at (0 when refused), held}
]]
--- @include "slot-leases"

local now = purge_leases(KEYS[1])
local exp = now + tonumber(ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], exp, ARGV[1])
  return {1, exp, redis.call('ZCARD', KEYS[1])}
end
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[2]) then return {0, 0, held} end
redis.call('ZADD', KEYS[1], exp, ARGV[1])
redis.call('PUBLISH', ARGV[4], 'lease\t' .. ARGV[5] .. '\t' .. (held + 1) .. '\t' .. ARGV[1] .. '\t+')
return {1, exp, held + 1}
