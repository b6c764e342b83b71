--[[
  replica-list: every live replica (the expired ones leave replicas on the way).

  KEYS  [1] replicas
  ARGV  [1] prefix
  Reply {replica json, …} in expiry order
]]
--- @include "now-ms"

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms())
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local out = {}
for _, id in ipairs(ids) do
  local v = redis.call('GET', ARGV[1] .. 'replica:' .. id)
  if v then out[#out + 1] = v end
end
return out
