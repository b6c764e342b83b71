--[[
  catalog-load-error: records why a model's load failed (failed_at = now), or clears it. Never
  creates an entry: a model deleted meanwhile stays deleted.

  KEYS  [1] catalog:m:<id>
  ARGV  [1] '1' (record) | '0' (clear)  [2] the error
  Reply 1 | 0 (no such entry)
]]
--- @include "now-ms"

if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] == '1' then
  redis.call('HSET', KEYS[1], 'last_error', ARGV[2], 'failed_at', now_ms())
else
  redis.call('HDEL', KEYS[1], 'last_error', 'failed_at')
end
return 1
