--[[
  task-create: a new task record, `queued` with fence 1 and the owner's lease (task-record.lua).

  KEYS  [1] task:<id>  [2] tasks:leases
  ARGV  [1] owner  [2] record  [3] lease ttl ms  [4] lifetime ms  [5] id
  Reply {'ok', fence (1), owner_until} | {'exists'} (nothing changed)
]]
--- @include "task-record"

if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
local until_ = record_create(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
redis.call('ZADD', KEYS[2], until_, ARGV[5])
return {'ok', 1, until_}
