--[[
  lease-list: the ids of a pool's live slot leases.

  KEYS  [1] leases:<pool key>  (slot-leases.lua)
  ARGV  none
  Reply {lease id, …} by expiry
]]
--- @include "slot-leases"

purge_leases(KEYS[1])
return redis.call('ZRANGE', KEYS[1], 0, -1)
