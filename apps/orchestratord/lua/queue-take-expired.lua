--[[
  queue-take-expired: entries past their deadline, removed (at most `limit`: the rest go next time).

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  [4] q:deadlines  (queue.lua)
  ARGV  [1] prefix  [2] limit
  Reply {id, entry json, order score, id, entry json, order score, …} (deadline order; the caller
        sorts them into dispatch order)
]]
--- @include "queue"

local ids = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now_ms(), 'LIMIT', 0, tonumber(ARGV[2]))
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
return out
