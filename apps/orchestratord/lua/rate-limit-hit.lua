--[[
  rate-limit-hit: one hit on a key's counter, which expires with its window (server time). INCR and
  PEXPIRE in one script: a counter is never left without its expiry.

  KEYS  [1] rl:<key>
  ARGV  [1] window ms
  Reply {count, ttl ms}
]]

local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if n == 1 or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {n, ttl}
