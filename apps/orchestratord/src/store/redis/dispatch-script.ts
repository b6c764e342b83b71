import { LuaScript } from './lua-script.js';
import { QUEUE_LUA } from './queue-scripts.js';
import { RECORD_LUA } from './record-lua.js';

/**
 * A dispatch as one script: the entry out of the queue (as its group's first, as queue-take, or
 * behind it when the pool the dispatch leased still has a free slot for every entry ahead: the
 * `DispatchRoom` rule) and the record `queued` → `running` under the caller's fence (as
 * task-dispatch), both or neither. KEYS = [q:lane:interactive, q:lane:batch, q:entries,
 * q:deadlines, task:<id>, leases:<pool key> (or task:<id> again: no room given)]; ARGV: prefix,
 * id, fence, placement, the pool's slots ('' = no room given) →
 * {'taken', entry json, record hash (flat)} | {'behind', first id} | {'absent'} |
 * {'refused', 'unknown'} | {'refused', 'fenced', owner, fence} | {'refused', 'state', state}.
 * Writes: the queue's keys (the entry unlinked, the head signal) and task:<id>.
 */
export const TASK_TAKE_DISPATCH = new LuaScript(
  'task-take-dispatch',
  `${QUEUE_LUA}${RECORD_LUA}local json = redis.call('HGET', KEYS[3], ARGV[2])
if not json then return {'absent'} end
local e = cjson.decode(json)
local first = redis.call('ZRANGE', gkey('interactive', e.group), 0, 0)[1]
if not first then first = redis.call('ZRANGE', gkey('batch', e.group), 0, 0)[1] end
if first ~= ARGV[2] then
  if ARGV[5] == '' then return {'behind', first} end
  -- Leases are scored by expiry: the live ones are those after now (the caller's own among them).
  local ahead = redis.call('ZRANK', gkey(e.lane, e.group), ARGV[2])
  if e.lane == 'batch' then ahead = ahead + redis.call('ZCARD', gkey('interactive', e.group)) end
  local free = tonumber(ARGV[5]) - redis.call('ZCOUNT', KEYS[6], '(' .. now_ms(), '+inf')
  if free < ahead then return {'behind', first} end
end
local refused = record_check(KEYS[5], ARGV[3], {'queued'})
if refused then return {'refused', refused[1], refused[2], refused[3]} end
unlink(ARGV[2], e)
redis.call('HSET', KEYS[5], 'state', 'running', 'placement', ARGV[4])
redis.call('HINCRBY', KEYS[5], 'attempt', 1)
return {'taken', json, redis.call('HGETALL', KEYS[5])}`,
);
