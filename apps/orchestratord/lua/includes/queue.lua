--[[
  The admission queue. Keys (all under the prefix p):
    p q:lane:interactive, p q:lane:batch   sorted sets: id → order score (dispatch order of a lane)
    p q:g:<lane>:<group>                   sorted sets: the same, per group (claims by model)
    p q:entries                            hash: id → JSON {lane, group, payload, deadline_at}
    p q:seq, p q:front                     counters
    p q:evicted:<id>                       marker of a drop-lru eviction, for queue-gone
  Scores: admission takes INCR q:seq (one order for the cluster, the order the store took them);
  requeue-at-front takes -INCR q:front, so the latest requeued entry leads its lane.

  A change of a group's first entry (an entry put first, or the first one removed) publishes
  `queue\t<group>\t<first id>\t<its payload>` on p signals (cluster-signals.ts); other changes
  publish nothing, so a queue that grows or shrinks behind its head costs no replica any work. Nor
  does an entry that comes to an empty group or leaves it empty: every waiting task has an entry,
  so no replica waits on that group (and each message wakes every replica: 2 a task without a backlog).

  Contract with the including script: KEYS[1..3] = q:lane:interactive, q:lane:batch, q:entries,
  and ARGV[1] = the prefix. An entry's deadline (`deadline_at`, absolute server ms, or 'inf') is
  kept for its owner to read back; expiry is the owner's (its task's deadline), not the queue's.
]]
--- @include "now-ms"
local P = ARGV[1]
local LANE = { interactive = KEYS[1], batch = KEYS[2] }
local function gkey(lane, group) return P .. 'q:g:' .. lane .. ':' .. group end
-- The group's first entry in dispatch order (the interactive lane first), or nil.
local function group_head(group)
  return redis.call('ZRANGE', gkey('interactive', group), 0, 0)[1] or redis.call('ZRANGE', gkey('batch', group), 0, 0)[1]
end
local function signal_head(group)
  local head = group_head(group)
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
  redis.call('HDEL', KEYS[3], id)
  if was_head and redis.call('EXISTS', gkey('interactive', e.group), gkey('batch', e.group)) > 0 then signal_head(e.group) end
end
local function put(id, lane, group, payload, deadline_ms, score)
  local others = redis.call('EXISTS', gkey('interactive', group), gkey('batch', group)) > 0
  local deadline = 'inf'
  if deadline_ms ~= '' then deadline = now_ms() + tonumber(deadline_ms) end
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
