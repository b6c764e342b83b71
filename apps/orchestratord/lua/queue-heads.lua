--[[
  queue-heads: the first entries of each lane, in dispatch order (read only).

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  [4] q:deadlines  (queue.lua)
  ARGV  [1] prefix  [2] limit (per lane)
  Reply {id, entry json, id, entry json, …}: the interactive lane's, then the batch lane's
]]
--- @include "queue"

local out = {}
for _, lane in ipairs({'interactive', 'batch'}) do
  for _, id in ipairs(redis.call('ZRANGE', LANE[lane], 0, tonumber(ARGV[2]) - 1)) do
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', KEYS[3], id)
  end
end
return out
