--[[
  task-requeue: an attempt that failed before its first token, in one step. The record goes
  running → queued under the caller's fence (keeping the attempt's placement and count) and its
  entry back at the front of its lane, ahead of every queued one, whatever the capacity (an entry
  queued with this id already stays where it is): both or neither. Refused, nothing changes: an
  entry put back for a task another replica took over would lead its lane with nobody to take it.

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  (queue.lua)  [4] task:<id>
  ARGV  [1] prefix  [2] id  [3] fence  [4] lane  [5] group  [6] payload
        [7] deadline ms from now ('' = none)
  Reply {'ok', record hash (flat)} | {'unknown'} | {'fenced', owner, fence} | {'state', state}
  Writes: task:<id> (state), the queue's keys (the entry, the head signal), p q:front.
]]
--- @include "queue"
--- @include "task-record"

local id, fence, lane, group, payload, deadline_ms = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local task_key = KEYS[4]

local refused = record_check(task_key, fence, {'running'})
if refused then return refused end
redis.call('HSET', task_key, 'state', 'queued')
if redis.call('HEXISTS', KEYS[3], id) == 0 then put(id, lane, group, payload, deadline_ms, -redis.call('INCR', P .. 'q:front')) end
return {'ok', redis.call('HGETALL', task_key)}
