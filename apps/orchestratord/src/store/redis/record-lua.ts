/*
 * The task record (`<prefix>task:<id>`, task-scripts.ts) as functions of its key, for the lifecycle
 * scripts that change it together with the queue and the session (admit-script.ts,
 * dispatch-script.ts, end-script.ts). Same fields, same checks in the same order as task-scripts.ts:
 * the contract tests (task-lifecycle-store.test.ts) hold the two to each other. Needs NOW_MS before it.
 */
export const RECORD_LUA = `local function record_create(key, owner, record, ttl_ms, lifetime_ms)
  local until_ = now_ms() + tonumber(ttl_ms)
  redis.call('HSET', key, 'state', 'queued', 'owner', owner, 'owner_until', until_, 'fence', 1, 'attempt', 0, 'record', record)
  redis.call('PEXPIRE', key, lifetime_ms)
  return until_
end
-- nil when the transition may go; else {'unknown'} | {'fenced', owner, fence} | {'state', state}.
local function record_check(key, fence, allowed)
  local h = redis.call('HMGET', key, 'state', 'fence', 'owner', 'owner_until')
  if not h[1] then return {'unknown'} end
  if tonumber(h[2]) ~= tonumber(fence) or tonumber(h[4]) <= now_ms() then return {'fenced', h[3], tonumber(h[2])} end
  for _, s in ipairs(allowed) do
    if s == h[1] then return nil end
  end
  return {'state', h[1]}
end
`;
