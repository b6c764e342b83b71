--[[
  task-take-dispatch: a dispatch in one step. The entry leaves the queue (as its group's first in
  dispatch order, or behind it when the pool the dispatch leased still has a free slot for every
  entry ahead: the `DispatchRoom` rule) and the record goes queued → running under the caller's
  fence (attempt + 1, the placement recorded): both or neither.

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  (queue.lua)
        [4] task:<id>  [5] leases:<pool key> (task:<id> again when no room is given)
  ARGV  [1] prefix  [2] id  [3] fence  [4] placement  [5] the pool's slots ('' = no room given)
  Reply {'taken', entry json, record hash (flat)} | {'behind', first id} | {'absent'}
        | {'refused', 'unknown'} | {'refused', 'fenced', owner, fence} | {'refused', 'state', state}
  Writes: the queue's keys (the entry unlinked, the head signal) and task:<id>.
]]
--- @include "queue"
--- @include "task-record"

local id, fence, placement, slots = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local task_key, pool_leases_key = KEYS[4], KEYS[5]

local json = redis.call('HGET', KEYS[3], id)
if not json then return {'absent'} end
local e = cjson.decode(json)
local first = group_head(e.group)
if first ~= id then
  if slots == '' then return {'behind', first} end
  -- Leases are scored by expiry: the live ones are those after now (the caller's own among them).
  local ahead = redis.call('ZRANK', gkey(e.lane, e.group), id)
  if e.lane == 'batch' then ahead = ahead + redis.call('ZCARD', gkey('interactive', e.group)) end
  local free = tonumber(slots) - redis.call('ZCOUNT', pool_leases_key, '(' .. now_ms(), '+inf')
  if free < ahead then return {'behind', first} end
end
local refused = record_check(task_key, fence, {'queued'})
if refused then return {'refused', refused[1], refused[2], refused[3]} end
unlink(id, e)
redis.call('HSET', task_key, 'state', 'running', 'placement', placement)
redis.call('HINCRBY', task_key, 'attempt', 1)
return {'taken', json, redis.call('HGETALL', task_key)}
