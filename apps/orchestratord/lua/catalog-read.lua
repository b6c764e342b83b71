--[[
  catalog-read: the catalog entry a name (id or alias) stands for, or every entry, with the server
  time (a load claim is live while its load_until is after it). Reads catalog:m:<id> from the prefix
  (a single Redis primary, as task-lapsed).

  KEYS  [1] catalog:ids  [2] catalog:names
  ARGV  [1] prefix  [2] name ('' = every entry)
  Reply {now, {id, the entry's hash (flat)}, …} (just {now} when none)
]]
--- @include "now-ms"

local now = now_ms()
local ids
if ARGV[2] == '' then
  ids = redis.call('SMEMBERS', KEYS[1])
else
  local id = redis.call('HGET', KEYS[2], ARGV[2])
  if not id then return { now } end
  ids = { id }
end
local out = { now }
for _, id in ipairs(ids) do
  local h = redis.call('HGETALL', ARGV[1] .. 'catalog:m:' .. id)
  if #h > 0 then out[#out + 1] = { id, h } end
end
return out
