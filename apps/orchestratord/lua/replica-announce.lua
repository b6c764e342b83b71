--[[
  replica-announce: a replica is alive for ttl more.

  KEYS  [1] replicas (sorted set: id → expiry, server ms)  [2] replica:<id> (JSON, expires with it)
  ARGV  [1] id  [2] replica json  [3] ttl ms
  Reply 1
]]
--- @include "now-ms"

redis.call('ZADD', KEYS[1], now_ms() + tonumber(ARGV[3]), ARGV[1])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
