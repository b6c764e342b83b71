import { LuaScript, NOW_MS } from './lua-script.js';

/*
 * Task records in Redis: KEYS[1] = <prefix>task:<id>, a hash with state, owner, owner_until
 * (server ms), fence, attempt, record, placement, outcome. The key expires `lifetime` after
 * creation, or `retain` after the task ended. Every transition checks, in this order: the task
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

/** ARGV: owner, record, ttl ms, lifetime ms → {'ok', fence, owner_until} | {'exists'}. */
export const TASK_CREATE = new LuaScript(
  'task-create',
  `${NOW_MS}if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
local until_ = now_ms() + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'state', 'queued', 'owner', ARGV[1], 'owner_until', until_, 'fence', 1, 'attempt', 0, 'record', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'ok', 1, until_}`,
);

/**
 * ARGV: owner, ttl ms → {'ok', fence, owner_until} | {'held', owner, owner_until} | {'unknown'} |
 * {'state', 'ended'}. Granted when no live owner holds it, or the caller does; always a new fence.
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
return {'ok', fence, until_}`,
);

/** ARGV: fence, ttl ms. */
export const TASK_RENEW = new LuaScript(
  'task-renew',
  `${CHECK}local refused = check(ARGV[1], {'queued', 'running'})
if refused then return refused end
redis.call('HSET', KEYS[1], 'owner_until', now + tonumber(ARGV[2]))
return ok()`,
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

/** ARGV: fence, outcome, retain ms. → ended, once. */
export const TASK_END = new LuaScript(
  'task-end',
  `${CHECK}local refused = check(ARGV[1], {'queued', 'running'})
if refused then return refused end
redis.call('HSET', KEYS[1], 'state', 'ended', 'outcome', ARGV[2])
redis.call('PEXPIRE', KEYS[1], math.max(1, tonumber(ARGV[3])))
return ok()`,
);
