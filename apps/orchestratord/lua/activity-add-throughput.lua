--[[
  activity-add-throughput: one replica's throughput contributions to a batch of buckets. One script
  for the whole batch: a bucket's counters and its expiry change together.

  KEYS  [1..n] act:tp:<width>:<start>, one hash per bucket: tokens, ended, ttft:<replica> = "p50 count"
  ARGV  [1] replica id  [2] retain ms, then for KEYS[i]: [4i-1] tokens  [4i] tasks ended
        [4i+1] ttft p50 ms ('' = none)  [4i+2] ttft count
  Reply n (buckets written)
]]

for i, key in ipairs(KEYS) do
  local a = 2 + (i - 1) * 4
  redis.call('HINCRBY', key, 'tokens', ARGV[a + 1])
  redis.call('HINCRBY', key, 'ended', ARGV[a + 2])
  if ARGV[a + 3] ~= '' then redis.call('HSET', key, 'ttft:' .. ARGV[1], ARGV[a + 3] .. ' ' .. ARGV[a + 4]) end
  redis.call('PEXPIRE', key, ARGV[2])
end
return #KEYS
