--[[
  catalog-put: registers or replaces a catalog entry (id = its ref), every name (the id and each
  alias) belonging to one entry only. Refused, writing nothing, when a name is another entry's.
  An update keeps registered_at, last_error/failed_at and the load claim; the aliases it drops are
  free again. Keys: catalog:ids (set of ids), catalog:names (hash: name → id), catalog:m:<id>
  (hash: spec (JSON: ref, sha256, aliases, policy, as the caller wrote it), registered_at (server
  ms), and while set last_error, failed_at, load_owner, load_until).

  KEYS  [1] catalog:ids  [2] catalog:names  [3] catalog:m:<id>
  ARGV  [1] id  [2] spec json  [3..] aliases
  Reply {'conflict', name, owner id} | {'created' | 'updated', now (server ms), the entry's hash (flat)}
]]
--- @include "now-ms"

local id = ARGV[1]
local names = { id }
for i = 3, #ARGV do names[#names + 1] = ARGV[i] end
for _, name in ipairs(names) do
  local owner = redis.call('HGET', KEYS[2], name)
  if owner and owner ~= id then return { 'conflict', name, owner } end
end
local now = now_ms()
local kind = 'created'
local old = redis.call('HGET', KEYS[3], 'spec')
if old then
  kind = 'updated'
  for _, alias in ipairs(cjson.decode(old)['aliases']) do redis.call('HDEL', KEYS[2], alias) end
else
  redis.call('HSET', KEYS[3], 'registered_at', now)
end
redis.call('HSET', KEYS[3], 'spec', ARGV[2])
for _, name in ipairs(names) do redis.call('HSET', KEYS[2], name, id) end
redis.call('SADD', KEYS[1], id)
return { kind, now, redis.call('HGETALL', KEYS[3]) }
