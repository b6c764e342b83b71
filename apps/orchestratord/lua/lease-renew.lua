--[[
  lease-renew: a held slot lease, extended from now.

  KEYS  [1] leases:<pool key>  (slot-leases.lua)
  ARGV  [1] lease id  [2] ttl ms
  Reply 1 (renewed) | 0 (lapsed or released)
]]
--- @include "slot-leases"

local now = purge_leases(KEYS[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
return 1
