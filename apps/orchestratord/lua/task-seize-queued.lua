--[[
  task-seize-queued: a dead replica's queued tasks to one replica, in one step: of the first
  `limit` entries of each lane in dispatch order, those whose payload names `from` and whose record
  is `queued` and owned by `from` get `owner` with a new fence and lease (scored in tasks:leases);
  their entries keep their places. Atomic, so two replicas that found the same replica dead never
  split its queued tasks between them.

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  [4] tasks:leases
  ARGV  [1] prefix  [2] from (owner)  [3] owner  [4] lease ttl ms  [5] limit (per lane)
  Reply {id, fence, id, fence, …} in dispatch order
]]
--- @include "now-ms"

local until_ = now_ms() + tonumber(ARGV[4])
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
return out
