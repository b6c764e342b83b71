--[[
  task-finish: a task's end in one step. A still queued entry leaves the queue (as queue-remove),
  the record → ended under the caller's fence (from queued or running, once; kept `retain` from
  now, out of tasks:leases), and the session's turn ends (session.lua).
  The entry and the session do not depend on the record's answer (as when they were three calls:
  a turn that ran is counted even when this replica's lease lapsed meanwhile).

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  (queue.lua)
        [4] task:<id>  [5] session:<session id> (any key when there is no session)  [6] tasks:leases
  ARGV  [1] prefix  [2] id  [3] fence  [4] outcome  [5] retain ms  [6] dequeue ('1' | '0')
        [7] session ('1' | '')  [8] tokens out ('' = ended with an error)  [9] node id
        [10] pool id ('' = keep the affinity)  [11] session ttl ms  [12] session active cap ms
  Reply {'ok', record hash (flat), dequeued 0 | 1} | {'unknown', dequeued}
        | {'fenced', dequeued, owner, fence} | {'state', dequeued, state}
  Writes: the queue's keys (when dequeued), task:<id> (its expiry becomes `retain`),
        session:<session id>, tasks:leases (the ended task leaves the lease index).
]]
--- @include "queue"
--- @include "task-record"
--- @include "session"

local id, fence, outcome, retain_ms, dequeue = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local session, tokens_out, node_id, pool_id, session_ttl_ms, session_cap_ms = ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12]
local task_key, session_key, leases_key = KEYS[4], KEYS[5], KEYS[6]

local dequeued = 0
if dequeue == '1' then
  local json = redis.call('HGET', KEYS[3], id)
  if json then
    unlink(id, cjson.decode(json))
    dequeued = 1
  end
end
if session == '1' then session_ended(session_key, tokens_out, node_id, pool_id, session_ttl_ms, session_cap_ms) end
local refused = record_check(task_key, fence, {'queued', 'running'})
if refused then return {refused[1], dequeued, refused[2], refused[3]} end
redis.call('HSET', task_key, 'state', 'ended', 'outcome', outcome)
redis.call('PEXPIRE', task_key, math.max(1, tonumber(retain_ms)))
redis.call('ZREM', leases_key, id)
return {'ok', redis.call('HGETALL', task_key), dequeued}
