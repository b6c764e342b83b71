--[[
  task-dispatch: the record queued → running under the caller's fence; a second dispatch finds
  'running' and is refused.

  KEYS  [1] task:<id>
  ARGV  [1] fence  [2] placement
  Reply {'ok', record hash (flat)} | {'unknown'} | {'fenced', owner, fence} | {'state', state}
]]
--- @include "task-record"

local now = now_ms()
local refused = record_check(KEYS[1], ARGV[1], {'queued'}, now)
if refused then return refused end
redis.call('HSET', KEYS[1], 'state', 'running', 'placement', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'attempt', 1)
return {'ok', redis.call('HGETALL', KEYS[1])}
