--[[
  catalog-claim-load: the right to start a load of a catalog model, for ttl. Granted when no claim
  is live or the caller holds it (a renewal); one caller wins among any number racing.

  KEYS  [1] catalog:m:<id>
  ARGV  [1] owner  [2] ttl ms
  Reply {'claimed', until (server ms)} | {'held', owner, until} | {'unknown'} (no such entry)
]]
--- @include "now-ms"

if redis.call('EXISTS', KEYS[1]) == 0 then return { 'unknown' } end
local now = now_ms()
local held = redis.call('HMGET', KEYS[1], 'load_owner', 'load_until')
if held[1] and tonumber(held[2]) > now and held[1] ~= ARGV[1] then
  return { 'held', held[1], tonumber(held[2]) }
end
local until_ms = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'load_owner', ARGV[1], 'load_until', until_ms)
return { 'claimed', until_ms }
