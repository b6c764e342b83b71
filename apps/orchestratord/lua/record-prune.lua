--[[
  record-prune: the index members a reader found without an entry leave both indexes — each only
  if its key is still absent here, so an entry written again since the read keeps its members.

  KEYS  [1] order index  [2] expiry index
  ARGV  [1] entry prefix (an entry's key is <entry prefix><id>)  [2..n] ids
  Reply how many members left
]]

local removed = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  if redis.call('EXISTS', ARGV[1] .. id) == 0 then
    removed = removed + redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[2], id)
  end
end
return removed
