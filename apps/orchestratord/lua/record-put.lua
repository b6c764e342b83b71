--[[
  record-put: writes one bounded record (a task record, a stored Response) with its TTL and keeps
  its set bounded, in one step: the entry, its two index members and the trim land together, so an
  index never names a trimmed entry that is still readable, nor outgrows the bound.

  1. Index members whose expiry has certainly passed leave both indexes (at most 100 per call: a
     write never pays for a long idle spell at once). "Certainly": the expiry index's score is the
     server's TIME + ttl, never before the key's own expiry (the key's clock is the script's start).
  2. The entry: SET PX ttl; its order (KEYS[2]) — the given score, or, with none given, the server's
     now on the first write only (a rewrite keeps its place); its expiry (KEYS[3]).
  3. Past `max` members, the lowest ordered go (at most 1000 per call), their entries deleted.

  KEYS  [1] the entry's key (<entry prefix><id>, a string)  [2] order index (zset id → order score)
        [3] expiry index (zset id → expiry, server ms)
  ARGV  [1] id  [2] value  [3] ttl ms (≥ 1)  [4] order score ('' = the server's now, kept on rewrite)
        [5] max entries  [6] entry prefix (the trimmed entries' keys are <entry prefix><id>)
  Reply {trimmed, expired}: how many entries the bound dropped, how many expired members left the indexes
]]
--- @include "now-ms"

local now = now_ms()
local ttl = tonumber(ARGV[3])

local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. now, 'LIMIT', 0, 100)
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
end

redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
if ARGV[4] == '' then
  redis.call('ZADD', KEYS[2], 'NX', now, ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
end
redis.call('ZADD', KEYS[3], now + ttl, ARGV[1])

local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
local trimmed = 0
if excess > 0 then
  local victims = redis.call('ZRANGE', KEYS[2], 0, math.min(excess, 1000) - 1)
  for _, id in ipairs(victims) do
    redis.call('DEL', ARGV[6] .. id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
  end
  trimmed = #victims
end
return {trimmed, #expired}
