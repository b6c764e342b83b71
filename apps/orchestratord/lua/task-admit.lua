--[[
  task-admit: admission in one step. Reads what the checks need (entries of the group ahead, the
  session's pool and tokens), refuses a spent session budget ('spent'), more than `max ahead`
  entries ahead ('late'), a taken id ('exists') and a full queue ('full') in that order, else
  creates the record (task-record.lua), queues the entry at the back of its lane (add_entry in
  queue.lua: capacity and policy) and starts the session's turn (session.lua). Nothing is written unless queued.

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  (queue.lua)
        [4] task:<id>  [5] session:<session id>  [6] tasks:leases
  ARGV  [1] prefix  [2] id  [3] lane  [4] group  [5] payload  [6] deadline ms from now ('' = none)
        [7] capacity  [8] policy  [9] eviction marker ms  [10] owner  [11] record
        [12] owner lease ttl ms  [13] lifetime ms  [14] session active cap ms
        [15] session token budget ('' = none)  [16] most entries ahead ('' = no limit)
  Reply {outcome, entries ahead, node id or '', pool id or '', tokens out or '', …}: outcome
        'spent' | 'late' | 'exists' | 'full', or 'queued' followed by position, evicted id or '',
        evicted json or '', owner_until
  Writes (besides the queue's keys): task:<id> (expiring `lifetime`), its lease in tasks:leases,
        session:<session id>, and on an eviction q:evicted:<victim>.
]]
--- @include "queue"
--- @include "task-record"
--- @include "session"

local id, lane, group, payload, deadline_ms = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local capacity, policy, evicted_ms = ARGV[7], ARGV[8], ARGV[9]
local owner, record, ttl_ms, lifetime_ms = ARGV[10], ARGV[11], ARGV[12], ARGV[13]
local session_cap_ms, budget, max_ahead = ARGV[14], ARGV[15], ARGV[16]
local task_key, session_key, leases_key = KEYS[4], KEYS[5], KEYS[6]

local s = redis.call('HMGET', session_key, 'tokens_out', 'node_id', 'pool_id')
local ahead = redis.call('ZCARD', gkey('interactive', group))
if lane == 'batch' then ahead = ahead + redis.call('ZCARD', gkey('batch', group)) end
local function answer(outcome, ...)
  return {outcome, ahead, s[2] or '', s[3] or '', s[1] or '', ...}
end
if budget ~= '' and tonumber(budget) - tonumber(s[1] or '0') <= 0 then return answer('spent') end
if max_ahead ~= '' and ahead > tonumber(max_ahead) then return answer('late') end
if redis.call('EXISTS', task_key) == 1 or redis.call('HEXISTS', KEYS[3], id) == 1 then return answer('exists') end
local r = add_entry(id, lane, group, payload, deadline_ms, capacity, policy, evicted_ms)
if not r then return answer('full') end
local owner_until = record_create(task_key, owner, record, ttl_ms, lifetime_ms)
redis.call('ZADD', leases_key, owner_until, id)
session_started(session_key, session_cap_ms)
return answer('queued', r[2], r[3], r[4], owner_until)
