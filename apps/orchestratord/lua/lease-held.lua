--[[
  lease-held: how many live slot leases a pool has.

  KEYS  [1] leases:<pool key>  (slot-leases.lua)
  ARGV  none
  Reply count
]]
--- @include "slot-leases"

purge_leases(KEYS[1])
return redis.call('ZCARD', KEYS[1])
