import { LuaScript, NOW_MS } from './lua-script.js';

/*
 * The admission queue in Redis. Keys (p = prefix):
 *   p q:lane:interactive, p q:lane:batch   sorted sets: id → order score (dispatch order of a lane)
 *   p q:g:<lane>:<group>                   sorted sets: the same, per group (claims by model)
 *   p q:entries                            hash: id → JSON {lane, group, payload, deadline_at, seq}
 *   p q:deadlines                          sorted set: id → absolute deadline (server ms)
 *   p q:seq, p q:front                     counters
 *   p q:evicted:<id>                       marker of a drop-lru eviction (10 min), for `gone`
 * Scores: admission takes INCR q:seq (one order for the cluster, the order the store took them);
 * requeue-at-front takes -INCR q:front, so the latest requeued entry leads its lane.
 * A change of a group's first entry (an entry put first, or the first one removed) publishes
 * `queue\t<group>\t<first id>\t<its payload>` on p signals (cluster-signals.ts); other changes publish
 * nothing, so a queue that grows or shrinks behind its head costs no replica any work. Nor does an
 * entry that comes to an empty group or leaves it empty: every waiting task has an entry, so no
 * replica waits on that group (and each message wakes every replica: 2 a task without a backlog).
 * Every script gets KEYS = [lane:interactive, lane:batch, entries, deadlines] and ARGV[1] = prefix
 * (the task lifecycle scripts, admit-script.ts and beside it, include these functions too).
 */
export const QUEUE_LUA = `${NOW_MS}local P = ARGV[1]
local LANE = { interactive = KEYS[1], batch = KEYS[2] }
local function gkey(lane, group) return P .. 'q:g:' .. lane .. ':' .. group end
local function signal_head(group)
  local head = redis.call('ZRANGE', gkey('interactive', group), 0, 0)[1] or redis.call('ZRANGE', gkey('batch', group), 0, 0)[1]
  local payload = ''
  if head then payload = cjson.decode(redis.call('HGET', KEYS[3], head)).payload else head = '' end
  redis.call('PUBLISH', P .. 'signals', 'queue\t' .. group .. '\t' .. head .. '\t' .. payload)
end
-- Whether the entry is its group's first in dispatch order (the interactive lane first).
local function is_head(id, lane, group)
  if lane == 'batch' and redis.call('ZCARD', gkey('interactive', group)) > 0 then return false end
  return redis.call('ZRANGE', gkey(lane, group), 0, 0)[1] == id
end
local function unlink(id, e)
  local was_head = is_head(id, e.lane, e.group)
  redis.call('ZREM', LANE[e.lane], id)
  redis.call('ZREM', gkey(e.lane, e.group), id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('HDEL', KEYS[3], id)
  if was_head and redis.call('EXISTS', gkey('interactive', e.group), gkey('batch', e.group)) > 0 then signal_head(e.group) end
end
local function put(id, lane, group, payload, deadline_ms, score)
  local others = redis.call('EXISTS', gkey('interactive', group), gkey('batch', group)) > 0
  local deadline = 'inf'
  if deadline_ms ~= '' then
    deadline = now_ms() + tonumber(deadline_ms)
    redis.call('ZADD', KEYS[4], deadline, id)
  end
  redis.call('ZADD', LANE[lane], score, id)
  redis.call('ZADD', gkey(lane, group), score, id)
  redis.call('HSET', KEYS[3], id, cjson.encode({ lane = lane, group = group, payload = payload, deadline_at = tostring(deadline) }))
  if others and is_head(id, lane, group) then redis.call('PUBLISH', P .. 'signals', 'queue\t' .. group .. '\t' .. id .. '\t' .. payload) end
end
-- Capacity and policy, then the entry at the back of its lane: {'queued', position, evicted id or '',
-- evicted json or ''}, or nil when the id is queued already or the queue is full (nothing changed).
local function add_entry(id, lane, group, payload, deadline_ms, capacity, policy, evicted_ms)
  if redis.call('HEXISTS', KEYS[3], id) == 1 then return nil end
  local victim, victim_json = '', ''
  if redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2]) >= tonumber(capacity) then
    if policy == 'reject' then return nil end
    local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
    if not head then return nil end
    victim, victim_json = head, redis.call('HGET', KEYS[3], head)
    unlink(head, cjson.decode(victim_json))
    redis.call('SET', P .. 'q:evicted:' .. head, '1', 'PX', evicted_ms)
  end
  put(id, lane, group, payload, deadline_ms, redis.call('INCR', P .. 'q:seq'))
  local position = redis.call('ZCARD', KEYS[1]) - 1
  if lane == 'batch' then position = position + redis.call('ZCARD', KEYS[2]) end
  return {'queued', position, victim, victim_json}
end
`;

/**
 * ARGV: prefix, id, lane, group, payload, deadline ms ('' = none), capacity, policy, eviction marker ms →
 * {'queued', position, evicted id or '', evicted json or ''} | {'full'} | {'duplicate'}.
 */
export const QUEUE_ADD = new LuaScript(
  'queue-add',
  `${QUEUE_LUA}local r = add_entry(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
if r then return r end
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then return {'duplicate'} end
return {'full'}`,
);

/** ARGV: prefix, id, lane, group, payload, deadline ms ('' = none) → 1, or 0 for a duplicate id. */
export const QUEUE_REQUEUE_FRONT = new LuaScript(
  'queue-requeue-front',
  `${QUEUE_LUA}if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then return 0 end
put(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], -redis.call('INCR', P .. 'q:front'))
return 1`,
);

/**
 * ARGV: prefix, then the groups to claim from (none = any) → {id, json} of the first entry in
 * dispatch order among them, removed; {} when none. Interactive first: of each lane the group heads
 * are compared by score.
 */
export const QUEUE_CLAIM = new LuaScript(
  'queue-claim',
  `${QUEUE_LUA}local function take(id)
  local json = redis.call('HGET', KEYS[3], id)
  unlink(id, cjson.decode(json))
  return {id, json}
end
for _, lane in ipairs({'interactive', 'batch'}) do
  if #ARGV == 1 then
    local head = redis.call('ZRANGE', LANE[lane], 0, 0)[1]
    if head then return take(head) end
  else
    local best, best_score = nil, nil
    for i = 2, #ARGV do
      local h = redis.call('ZRANGE', gkey(lane, ARGV[i]), 0, 0, 'WITHSCORES')
      if h[1] and (best == nil or tonumber(h[2]) < best_score) then best, best_score = h[1], tonumber(h[2]) end
    end
    if best then return take(best) end
  end
end
return {}`,
);

/**
 * ARGV: prefix, id → {'taken', json} when the id is its group's first entry in dispatch order
 * (interactive lane first), removed; {'behind', first id}; {'absent'}.
 */
export const QUEUE_TAKE = new LuaScript(
  'queue-take',
  `${QUEUE_LUA}local json = redis.call('HGET', KEYS[3], ARGV[2])
if not json then return {'absent'} end
local e = cjson.decode(json)
local first = redis.call('ZRANGE', gkey('interactive', e.group), 0, 0)[1]
if not first then first = redis.call('ZRANGE', gkey('batch', e.group), 0, 0)[1] end
if first ~= ARGV[2] then return {'behind', first} end
unlink(ARGV[2], e)
return {'taken', json}`,
);

/** ARGV: prefix, ids… → {id, evicted 0/1, …} of the ids that are not queued. */
export const QUEUE_GONE = new LuaScript(
  'queue-gone',
  `${QUEUE_LUA}local out = {}
for i = 2, #ARGV do
  if redis.call('HEXISTS', KEYS[3], ARGV[i]) == 0 then
    out[#out + 1] = ARGV[i]
    out[#out + 1] = redis.call('EXISTS', P .. 'q:evicted:' .. ARGV[i])
  end
end
return out`,
);

/** ARGV: prefix, limit → {id, json, …}: the first `limit` entries of each lane, in dispatch order. */
export const QUEUE_HEADS = new LuaScript(
  'queue-heads',
  `${QUEUE_LUA}local out = {}
for _, lane in ipairs({'interactive', 'batch'}) do
  for _, id in ipairs(redis.call('ZRANGE', LANE[lane], 0, tonumber(ARGV[2]) - 1)) do
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', KEYS[3], id)
  end
end
return out`,
);

/** ARGV: prefix, id → json of the removed entry, or false. */
export const QUEUE_REMOVE = new LuaScript(
  'queue-remove',
  `${QUEUE_LUA}local json = redis.call('HGET', KEYS[3], ARGV[2])
if not json then return false end
unlink(ARGV[2], cjson.decode(json))
return json`,
);

/** ARGV: prefix, id → 0-based position in dispatch order, or -1. */
export const QUEUE_POSITION = new LuaScript(
  'queue-position',
  `${QUEUE_LUA}local json = redis.call('HGET', KEYS[3], ARGV[2])
if not json then return -1 end
local lane = cjson.decode(json).lane
local rank = redis.call('ZRANK', LANE[lane], ARGV[2])
if lane == 'batch' then rank = rank + redis.call('ZCARD', KEYS[1]) end
return rank`,
);

/** ARGV: prefix, group, lane → entries of the group a new entry of that lane waits behind. */
export const QUEUE_COUNT_AHEAD = new LuaScript(
  'queue-count-ahead',
  `${QUEUE_LUA}local n = redis.call('ZCARD', gkey('interactive', ARGV[2]))
if ARGV[3] == 'batch' then n = n + redis.call('ZCARD', gkey('batch', ARGV[2])) end
return n`,
);

/** ARGV: prefix, limit → {id, json, score, id, json, score, …} of expired entries (at most limit), removed. */
export const QUEUE_TAKE_EXPIRED = new LuaScript(
  'queue-take-expired',
  `${QUEUE_LUA}local ids = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now_ms(), 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, id in ipairs(ids) do
  local json = redis.call('HGET', KEYS[3], id)
  if json then
    local e = cjson.decode(json)
    local score = redis.call('ZSCORE', LANE[e.lane], id)
    unlink(id, e)
    out[#out + 1] = id
    out[#out + 1] = json
    out[#out + 1] = score
  else
    redis.call('ZREM', KEYS[4], id)
  end
end
return out`,
);
