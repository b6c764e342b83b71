--[[
  A pool's slot leases, <prefix>leases:<pool key>: a sorted set, lease id → expiry (server ms).
  Every script purges the expired leases first; an empty set is deleted by Redis itself.
]]
--- @include "now-ms"
-- Drops the expired leases → now.
local function purge_leases(key)
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  return now
end
