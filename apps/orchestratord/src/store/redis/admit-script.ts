import { LuaScript } from './lua-script.js';
import { QUEUE_LUA } from './queue-scripts.js';
import { RECORD_LUA } from './record-lua.js';
import { SESSION_LUA } from './redis-sessions.js';

/*
 * Admission as one script, one round trip: what the checks read (entries of the group ahead, the
 * session's pool and tokens), the session budget and deadline refusals, then the task record, the
 * queue entry and the session's started turn.
 * KEYS = [q:lane:interactive, q:lane:batch, q:entries, q:deadlines, task:<id>, session:<session id>,
 * tasks:leases]. Writes (besides the queue's keys, queue-scripts.ts): task:<id> (created, expiring
 * `lifetime`), its owner lease in tasks:leases, session:<session id> (`session_started`), and on an
 * eviction q:evicted:<victim>.
 */

/**
 * ARGV: prefix, id, lane, group, payload, deadline ms ('' = none), capacity, policy, eviction marker ms,
 * owner, record, owner ttl ms, lifetime ms, session active cap ms, token budget ('' = none),
 * most entries ahead ('' = no limit) → {outcome, entries ahead, node id or '', pool id or '', tokens
 * out or '', …} where outcome is 'spent' | 'late' | 'exists' | 'full', or 'queued' followed by
 * position, evicted id or '', evicted json or '', owner_until. Nothing is written unless queued.
 */
export const TASK_ADMIT = new LuaScript(
  'task-admit',
  `${QUEUE_LUA}${RECORD_LUA}${SESSION_LUA}local s = redis.call('HMGET', KEYS[6], 'tokens_out', 'node_id', 'pool_id')
local ahead = redis.call('ZCARD', gkey('interactive', ARGV[4]))
if ARGV[3] == 'batch' then ahead = ahead + redis.call('ZCARD', gkey('batch', ARGV[4])) end
local function answer(outcome, ...)
  return {outcome, ahead, s[2] or '', s[3] or '', s[1] or '', ...}
end
if ARGV[15] ~= '' and tonumber(ARGV[15]) - tonumber(s[1] or '0') <= 0 then return answer('spent') end
if ARGV[16] ~= '' and ahead > tonumber(ARGV[16]) then return answer('late') end
if redis.call('EXISTS', KEYS[5]) == 1 or redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then return answer('exists') end
local r = add_entry(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
if not r then return answer('full') end
local owner_until = record_create(KEYS[5], ARGV[10], ARGV[11], ARGV[12], ARGV[13])
redis.call('ZADD', KEYS[7], owner_until, ARGV[2])
session_started(KEYS[6], ARGV[14])
return answer('queued', r[2], r[3], r[4], owner_until)`,
);
