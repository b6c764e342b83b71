--[[
  node-register: a node (re)registers: its hash is replaced, state 'registering', seen now.
  Keys: nodes (set of ids), nodes:live (sorted set: id → last seen, server ms, of nodes not
  offline), node:<id> (hash: request, state, state_since, last_seen, pools, and memory once a
  heartbeat reports it; JSON where structured).

  KEYS  [1] nodes  [2] nodes:live  [3] node:<id>
  ARGV  [1] id  [2] request json  [3] pools json
  Reply now (server ms)
]]
--- @include "now-ms"

local now = now_ms()
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'request', ARGV[2], 'state', 'registering', 'state_since', now, 'last_seen', now, 'pools', ARGV[3])
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], now, ARGV[1])
return now
