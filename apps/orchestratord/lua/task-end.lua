--[[
  task-end: the record → ended (from queued or running, once) under the caller's fence; the key
  is kept `retain` from now and leaves tasks:leases.

  KEYS  [1] task:<id>  [2] tasks:leases
  ARGV  [1] fence  [2] outcome  [3] retain ms  [4] id
  Reply {'ok', record hash (flat)} | {'unknown'} | {'fenced', owner, fence} | {'state', state}
]]
--- @include "task-record"

local now = now_ms()
local refused = record_check(KEYS[1], ARGV[1], {'queued', 'running'}, now)
if refused then return refused end
redis.call('HSET', KEYS[1], 'state', 'ended', 'outcome', ARGV[2])
redis.call('PEXPIRE', KEYS[1], math.max(1, tonumber(ARGV[3])))
redis.call('ZREM', KEYS[2], ARGV[4])
return {'ok', redis.call('HGETALL', KEYS[1])}
