--[[
  task-renew-many: every lease of one owner, extended from now in one call. Ended or unknown tasks
  are skipped.

  KEYS  [1] tasks:leases  [2..] task:<id> of each task
  ARGV  [1] lease ttl ms, then for KEYS[i] (i ≥ 2): [2i-2] its id  [2i-1] its fence
  Reply {id, …}: the tasks it could not renew (fence moved on, or lease lapsed)
]]
--- @include "now-ms"

local now = now_ms()
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
return refused
