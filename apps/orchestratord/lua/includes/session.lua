--[[
  Sessions, <prefix>session:<id>: a hash with turns, tokens_out, active, last_active, node_id,
  pool_id. Idle, the key expires `ttl` after the last activity; with a task active, `cap` after it
  (a replica that died while running a task never says it ended).
]]
--- @include "now-ms"
local function session_started(key, cap_ms)
  redis.call('HSETNX', key, 'turns', 0)
  redis.call('HSETNX', key, 'tokens_out', 0)
  redis.call('HINCRBY', key, 'active', 1)
  redis.call('HSET', key, 'last_active', now_ms())
  redis.call('PEXPIRE', key, cap_ms)
end
-- tokens_out '' = ended with an error; pool_id '' = keep the affinity. → 1, or 0 when the session is gone.
local function session_ended(key, tokens_out, node_id, pool_id, ttl_ms, cap_ms)
  if redis.call('EXISTS', key) == 0 then return 0 end
  if pool_id ~= '' then redis.call('HSET', key, 'node_id', node_id, 'pool_id', pool_id) end
  local active = math.max(0, tonumber(redis.call('HGET', key, 'active') or '0') - 1)
  redis.call('HSET', key, 'active', active, 'last_active', now_ms())
  if tokens_out ~= '' then
    redis.call('HINCRBY', key, 'turns', 1)
    redis.call('HINCRBY', key, 'tokens_out', tokens_out)
  end
  if active == 0 then redis.call('PEXPIRE', key, ttl_ms) else redis.call('PEXPIRE', key, cap_ms) end
  return 1
end
