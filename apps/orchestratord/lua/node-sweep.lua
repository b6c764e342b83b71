--[[
  node-sweep: nodes seen more than 3 intervals ago (strictly) go offline. A marked node leaves
  nodes:live, so no later sweep (of any replica) returns it again until a heartbeat brings it back.

  KEYS  [1] nodes:live
  ARGV  [1] prefix  [2] heartbeat interval ms
  Reply {id, …}: the nodes marked offline by this call
]]
--- @include "now-ms"

local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - 3 * tonumber(ARGV[2])))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local key = ARGV[1] .. 'node:' .. id
  if redis.call('EXISTS', key) == 1 then redis.call('HSET', key, 'state', 'offline', 'state_since', now) end
end
return ids
