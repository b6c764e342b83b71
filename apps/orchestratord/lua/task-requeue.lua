--[[
  task-requeue: the record running → queued under the caller's fence.

  KEYS  [1] task:<id>
  ARGV  [1] fence
  Reply {'ok', record hash (flat)} | {'unknown'} | {'fenced', owner, fence} | {'state', state}
]]
--- @include "task-record"

local now = now_ms()
local refused = record_check(KEYS[1], ARGV[1], {'running'}, now)
if refused then return refused end
redis.call('HSET', KEYS[1], 'state', 'queued')
return {'ok', redis.call('HGETALL', KEYS[1])}
