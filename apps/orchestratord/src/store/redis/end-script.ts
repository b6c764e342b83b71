import { LuaScript } from './lua-script.js';
import { QUEUE_LUA } from './queue-scripts.js';
import { RECORD_LUA } from './record-lua.js';
import { SESSION_LUA } from './redis-sessions.js';

/**
 * A task's end as one script: a still queued entry out of the queue (as queue-remove), the record
 * → `ended` under the caller's fence (as task-end), and the session's turn (as session-ended).
 * The entry and the session do not depend on the record's answer — as when they were three calls:
 * a turn that ran is counted even when this replica's lease lapsed meanwhile.
 * KEYS = [q:lane:interactive, q:lane:batch, q:entries, q:deadlines, task:<id>, session:<id> (or
 * any key when ARGV[7] is ''), tasks:leases]; ARGV: prefix, id, fence, outcome, retain ms, dequeue ('1'/'0'),
 * session ('1'/''), tokens out ('' = an error), node id, pool id ('' = keep), session ttl ms,
 * session active cap ms → {'ok', record hash (flat), dequeued 0/1} | {'unknown', dequeued} |
 * {'fenced', dequeued, owner, fence} | {'state', dequeued, state}.
 * Writes: the queue's keys (when dequeued), task:<id> (its expiry becomes `retain`), session:<id>,
 * tasks:leases (the ended task leaves the lease index).
 */
export const TASK_FINISH = new LuaScript(
  'task-finish',
  `${QUEUE_LUA}${RECORD_LUA}${SESSION_LUA}local dequeued = 0
if ARGV[6] == '1' then
  local json = redis.call('HGET', KEYS[3], ARGV[2])
  if json then
    unlink(ARGV[2], cjson.decode(json))
    dequeued = 1
  end
end
if ARGV[7] == '1' then session_ended(KEYS[6], ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12]) end
local refused = record_check(KEYS[5], ARGV[3], {'queued', 'running'})
if refused then return {refused[1], dequeued, refused[2], refused[3]} end
redis.call('HSET', KEYS[5], 'state', 'ended', 'outcome', ARGV[4])
redis.call('PEXPIRE', KEYS[5], math.max(1, tonumber(ARGV[5])))
redis.call('ZREM', KEYS[7], ARGV[2])
return {'ok', redis.call('HGETALL', KEYS[5]), dequeued}`,
);
