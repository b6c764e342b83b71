import { LuaScript, NOW_MS } from './lua-script.js';
import { QUEUE_LUA } from './queue-scripts.js';
import { RECORD_LUA } from './record-lua.js';
import { SESSION_LUA } from './redis-sessions.js';

/*
 * Admission as one script: the task record, the queue entry and the session's started turn.
 * KEYS = [q:lane:interactive, q:lane:batch, q:entries, q:deadlines, task:<id>, session:<session id>,
 * tasks:leases]. Writes (besides the queue's keys, queue-scripts.ts): task:<id> (created, expiring
 * `lifetime`), its owner lease in tasks:leases, session:<session id> (`session_started`), and on an
 * eviction q:evicted:<victim>.
 */

/**
 * ARGV: prefix, id, lane, group, payload, deadline ms ('' = none), capacity, policy, eviction marker ms,
 * owner, record, owner ttl ms, lifetime ms, session active cap ms →
 * {'queued', position, evicted id or '', evicted json or '', owner_until} | {'full'} | {'exists'}.
 * Nothing is written unless the task is queued.
 */
export const TASK_ADMIT = new LuaScript(
  'task-admit',
  `${QUEUE_LUA}${RECORD_LUA}${SESSION_LUA}if redis.call('EXISTS', KEYS[5]) == 1 or redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then return {'exists'} end
local r = add_entry(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
if not r then return {'full'} end
r[5] = record_create(KEYS[5], ARGV[10], ARGV[11], ARGV[12], ARGV[13])
redis.call('ZADD', KEYS[7], r[5], ARGV[2])
session_started(KEYS[6], ARGV[14])
return r`,
);

/**
 * What admission reads: KEYS = [q:g:interactive:<group>, q:g:batch:<group>, session:<id>], ARGV: the
 * lane → {entries ahead, node id or '', pool id or '', tokens out or ''}. Read-only.
 */
export const ADMISSION_VIEW = new LuaScript(
  'admission-view',
  `${NOW_MS}local n = redis.call('ZCARD', KEYS[1])
if ARGV[1] == 'batch' then n = n + redis.call('ZCARD', KEYS[2]) end
local h = redis.call('HMGET', KEYS[3], 'turns', 'tokens_out', 'node_id', 'pool_id')
if not h[1] then return {n, '', '', ''} end
return {n, h[3] or '', h[4] or '', h[2]}`,
);
