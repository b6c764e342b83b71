--[[
  node-deregister: a node leaves the registry.

  KEYS  [1] nodes  [2] nodes:live  [3] node:<id>
  ARGV  [1] id
  Reply 1 (removed) | 0 (unknown)
]]

redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[1], ARGV[1])
return redis.call('DEL', KEYS[3])
