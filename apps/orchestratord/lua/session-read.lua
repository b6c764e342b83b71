--[[
  session-read: a session's counters, affinity and remaining time to live (read only).

  KEYS  [1] session:<id>
  ARGV  none
  Reply {turns, tokens_out, active, node id or '', pool id or '', pttl ms} (the first five as
        strings) | {} (no such session)
]]

local h = redis.call('HMGET', KEYS[1], 'turns', 'tokens_out', 'active', 'node_id', 'pool_id')
if not h[1] then return {} end
return {h[1], h[2], h[3], h[4] or '', h[5] or '', redis.call('PTTL', KEYS[1])}
