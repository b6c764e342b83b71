--[[
  task-lapsed: the tasks not ended whose owner's lease lapsed (orphans), oldest first. Members of
  tasks:leases whose record is gone (expired) or ended are dropped on the way.

  KEYS  [1] tasks:leases
  ARGV  [1] limit  [2] prefix
  Reply {id, …}: at most `limit`
]]
--- @include "now-ms"

local limit = tonumber(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms(), 'LIMIT', 0, limit * 2)
local out = {}
for _, id in ipairs(ids) do
  local state = redis.call('HGET', ARGV[2] .. 'task:' .. id, 'state')
  if not state or state == 'ended' then
    redis.call('ZREM', KEYS[1], id)
  elseif #out < limit then
    out[#out + 1] = id
  end
end
return out
