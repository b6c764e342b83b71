--[[
  catalog-release-load: the holder gives its live load claim back.

  KEYS  [1] catalog:m:<id>
  ARGV  [1] owner
  Reply 1 (released) | 0 (not this owner's, lapsed, or no such entry)
]]
--- @include "now-ms"

local held = redis.call('HMGET', KEYS[1], 'load_owner', 'load_until')
if held[1] ~= ARGV[1] or tonumber(held[2]) <= now_ms() then return 0 end
redis.call('HDEL', KEYS[1], 'load_owner', 'load_until')
return 1
