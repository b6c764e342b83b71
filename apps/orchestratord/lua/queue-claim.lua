--[[
  queue-claim: the first entry in dispatch order among some groups, removed. Interactive lane
  first; within a lane the groups' heads are compared by score.

  KEYS  [1] q:lane:interactive  [2] q:lane:batch  [3] q:entries  [4] q:deadlines  (queue.lua)
  ARGV  [1] prefix  [2..] the groups to claim from (none = any)
  Reply {id, entry json} | {} (none)
]]
--- @include "queue"

local function take(id)
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
return {}
