import { LuaScript, NOW_MS } from './lua-script.js';

/**
 * A dead replica's queued tasks to one replica, in one step (`TaskLifecycleStore.seizeQueued`): the
 * first `limit` entries of each lane in dispatch order whose payload names `from`, and whose record
 * is `queued` and owned by `from`, get `owner` with a new fence and lease (the lease index scored);
 * their entries keep their places. Atomic, so two replicas that found the same replica dead never
 * split its queued tasks between them.
 * KEYS = [q:lane:interactive, q:lane:batch, q:entries, tasks:leases]; ARGV: prefix, from, owner,
 * ttl ms, limit → {id, fence, id, fence, …} in dispatch order.
 */
export const TASK_SEIZE_QUEUED = new LuaScript(
  'task-seize-queued',
  `${NOW_MS}local until_ = now_ms() + tonumber(ARGV[4])
local out = {}
for l = 1, 2 do
  for _, id in ipairs(redis.call('ZRANGE', KEYS[l], 0, tonumber(ARGV[5]) - 1)) do
    local json = redis.call('HGET', KEYS[3], id)
    if json and cjson.decode(json).payload == ARGV[2] then
      local key = ARGV[1] .. 'task:' .. id
      local h = redis.call('HMGET', key, 'state', 'owner')
      if h[1] == 'queued' and h[2] == ARGV[2] then
        out[#out + 1] = id
        out[#out + 1] = redis.call('HINCRBY', key, 'fence', 1)
        redis.call('HSET', key, 'owner', ARGV[3], 'owner_until', until_)
        redis.call('ZADD', KEYS[4], until_, id)
      end
    end
  end
end
return out`,
);
