import { LuaScript, NOW_MS } from './lua-script.js';

/*
 * Task records in Redis: KEYS[1] = <prefix>task:<id>, a hash with state, owner, owner_until
 * (server ms), fence, attempt, record, placement, outcome. The key expires `lifetime` after
 * creation, or `retain` after the task ended. KEYS[2] (where a script takes it) = <prefix>tasks:leases,
 * a sorted set of the tasks not ended, scored by owner_until: create, acquire and renew set the
 * score, end removes the member, so orphans are found by score (`TASK_LAPSED`). Every transition checks, in this order: the task
 * exists ('unknown'), the caller's fence is current and its lease has not lapsed ('fenced'), the
 * state allows it ('state'); on success it returns the whole hash (flat field/value list).
 */
const CHECK = `${NOW_MS}local now = now_ms()
local function check(fence, allowed)
  local h = redis.call('HMGET', KEYS[1], 'state', 'fence', 'owner', 'owner_until')
  if not h[1] then return {'unknown'} end
  if tonumber(h[2]) ~= tonumber(fence) or tonumber(h[4]) <= now then return {'fenced', h[3], tonumber(h[2])} end
  for _, s in ipairs(allowed) do
    if s == h[1] then return nil end
  end
  return {'state', h[1]}
end
local function ok()
  return {'ok', redis.call('HGETALL', KEYS[1])}
end
`;

/** KEYS: task, leases. ARGV: owner, record, ttl ms, lifetime ms, id → {'ok', fence, owner_until} | {'exists'}. */
export const TASK_CREATE = new LuaScript(
  'task-create',
  `${NOW_MS}if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
local until_ = now_ms() + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'state', 'queued', 'owner', ARGV[1], 'owner_until', until_, 'fence', 1, 'attempt', 0, 'record', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], until_, ARGV[5])
return {'ok', 1, until_}`,
);

/**
 * KEYS: task, leases. ARGV: owner, ttl ms, id, record ('' = keep) → {'ok', fence, owner_until} |
 * {'held', owner, owner_until} | {'unknown'} | {'state', 'ended'}. Granted when no live owner
 * holds it, or the caller does; always a new fence.
 */
export const TASK_ACQUIRE = new LuaScript(
  'task-acquire',
  `${NOW_MS}local h = redis.call('HMGET', KEYS[1], 'state', 'owner', 'owner_until')
if not h[1] then return {'unknown'} end
if h[1] == 'ended' then return {'state', 'ended'} end
local now = now_ms()
if tonumber(h[3]) > now and h[2] ~= ARGV[1] then return {'held', h[2], tonumber(h[3])} end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
local until_ = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'owner_until', until_)
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'record', ARGV[4]) end
redis.call('ZADD', KEYS[2], until_, ARGV[3])
return {'ok', fence, until_}`,
);

/**
 * KEYS: task, leases. ARGV: from owner, from fence, owner, ttl ms, id, record ('' = keep) →
 * {'ok', fence, owner_until} | {'fenced', owner, fence} | {'unknown'} | {'state', 'ended'}. Granted
 * while `from` holds the task under that fence, whether or not its lease has lapsed; a new fence.
 */
export const TASK_SEIZE = new LuaScript(
  'task-seize',
  `${NOW_MS}local h = redis.call('HMGET', KEYS[1], 'state', 'owner', 'fence')
if not h[1] then return {'unknown'} end
if h[1] == 'ended' then return {'state', 'ended'} end
if h[2] ~= ARGV[1] or tonumber(h[3]) ~= tonumber(ARGV[2]) then return {'fenced', h[2], tonumber(h[3])} end
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
local until_ = now_ms() + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'owner', ARGV[3], 'owner_until', until_)
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'record', ARGV[6]) end
redis.call('ZADD', KEYS[2], until_, ARGV[5])
return {'ok', fence, until_}`,
);

/** KEYS: task, leases. ARGV: fence, ttl ms, id. */
export const TASK_RENEW = new LuaScript(
  'task-renew',
  `${CHECK}local refused = check(ARGV[1], {'queued', 'running'})
if refused then return refused end
redis.call('HSET', KEYS[1], 'owner_until', now + tonumber(ARGV[2]))
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
return ok()`,
);

/**
 * KEYS: leases, then task:<id> of each task. ARGV: ttl ms, then id, fence of each → the ids it
 * could not renew (fence moved on or lease lapsed). Ended or unknown tasks are skipped.
 */
export const TASK_RENEW_MANY = new LuaScript(
  'task-renew-many',
  `${NOW_MS}local now = now_ms()
local until_ = now + tonumber(ARGV[1])
local refused = {}
for i = 2, #KEYS do
  local id = ARGV[2 * i - 2]
  local h = redis.call('HMGET', KEYS[i], 'state', 'fence', 'owner_until')
  if h[1] and h[1] ~= 'ended' then
    if tonumber(h[2]) ~= tonumber(ARGV[2 * i - 1]) or tonumber(h[3]) <= now then
      refused[#refused + 1] = id
    else
      redis.call('HSET', KEYS[i], 'owner_until', until_)
      redis.call('ZADD', KEYS[1], until_, id)
    end
  end
end
return refused`,
);

/**
 * KEYS: leases. ARGV: limit, key prefix → up to `limit` ids of tasks not ended whose lease lapsed,
 * oldest first. Members whose record is gone (expired) or ended are dropped on the way.
 */
export const TASK_LAPSED = new LuaScript(
  'task-lapsed',
  `${NOW_MS}local limit = tonumber(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_ms(), 'LIMIT', 0, limit * 2)
local out = {}
for _, id in ipairs(ids) do
  local state = redis.call('HGET', ARGV[2] .. 'task:' .. id, 'state')
  if not state or state == 'ended' then
    redis.call('ZREM', KEYS[1], id)
  elseif #out < limit then
    out[#out + 1] = id
  end
end
return out`,
);

/** ARGV: fence, placement. queued → running; a second dispatch finds 'running' and is refused. */
export const TASK_DISPATCH = new LuaScript(
  'task-dispatch',
  `${CHECK}local refused = check(ARGV[1], {'queued'})
if refused then return refused end
redis.call('HSET', KEYS[1], 'state', 'running', 'placement', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'attempt', 1)
return ok()`,
);

/** ARGV: fence. running → queued. */
export const TASK_REQUEUE = new LuaScript(
  'task-requeue',
  `${CHECK}local refused = check(ARGV[1], {'running'})
if refused then return refused end
redis.call('HSET', KEYS[1], 'state', 'queued')
return ok()`,
);

/** KEYS: task, leases. ARGV: fence, outcome, retain ms, id. → ended, once. */
export const TASK_END = new LuaScript(
  'task-end',
  `${CHECK}local refused = check(ARGV[1], {'queued', 'running'})
if refused then return refused end
redis.call('HSET', KEYS[1], 'state', 'ended', 'outcome', ARGV[2])
redis.call('PEXPIRE', KEYS[1], math.max(1, tonumber(ARGV[3])))
redis.call('ZREM', KEYS[2], ARGV[4])
return ok()`,
);
