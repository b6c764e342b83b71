--[[
  catalog-delete: removes the entry a name (id or alias) stands for, its names and its load claim.

  KEYS  [1] catalog:ids  [2] catalog:names
  ARGV  [1] prefix  [2] name
  Reply {now, {id, the removed entry's hash (flat)}} | {now} (no such name: nothing changed)
]]
--- @include "now-ms"

local now = now_ms()
local id = redis.call('HGET', KEYS[2], ARGV[2])
if not id then return { now } end
local key = ARGV[1] .. 'catalog:m:' .. id
local h = redis.call('HGETALL', key)
local spec = redis.call('HGET', key, 'spec')
if spec then
  for _, alias in ipairs(cjson.decode(spec)['aliases']) do redis.call('HDEL', KEYS[2], alias) end
end
redis.call('HDEL', KEYS[2], id)
redis.call('SREM', KEYS[1], id)
redis.call('DEL', key)
return { now, { id, h } }
