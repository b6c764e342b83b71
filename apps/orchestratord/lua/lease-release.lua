--[[
  lease-release: a slot lease given back, signalled on the signals channel:
  `lease\t<pool key>\t<held>\t<lease id>\t-`.

  KEYS  [1] leases:<pool key>  (slot-leases.lua)
  ARGV  [1] lease id  [2] signals channel  [3] pool key
  Reply 1 (released) | 0 (not held)
]]
--- @include "slot-leases"

purge_leases(KEYS[1])
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('PUBLISH', ARGV[2], 'lease\t' .. ARGV[3] .. '\t' .. redis.call('ZCARD', KEYS[1]) .. '\t' .. ARGV[1] .. '\t-')
return 1
