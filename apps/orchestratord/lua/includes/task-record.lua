--[[
  The task record, <prefix>task:<id>: a hash with state ('queued' | 'running' | 'ended'), owner,
  owner_until (server ms), fence, attempt, record, placement, outcome. The key expires `lifetime`
  after creation, or `retain` after the task ended. <prefix>tasks:leases is a sorted set of the
  tasks not ended, scored by owner_until: create, acquire and renew set the score, end removes the
  member, so orphans are found by score (task-lapsed).

  Every transition checks, in this order: the task exists ('unknown'), the caller's fence is current
  and its lease has not lapsed ('fenced'), the state allows it ('state'); on success the scripts
  answer the whole hash (a flat field/value list).
]]
--- @include "now-ms"
-- Creates the record `queued` with fence 1 and the owner's lease → owner_until.
local function record_create(key, owner, record, ttl_ms, lifetime_ms)
  local until_ = now_ms() + tonumber(ttl_ms)
  redis.call('HSET', key, 'state', 'queued', 'owner', owner, 'owner_until', until_, 'fence', 1, 'attempt', 0, 'record', record)
  redis.call('PEXPIRE', key, lifetime_ms)
  return until_
end
-- nil when the transition may go; else {'unknown'} | {'fenced', owner, fence} | {'state', state}.
-- `now`: the script's own clock reading when it has one (a renewal sets the lease from the instant
-- it checked against); nil = read the clock here, and only when the fence matches.
local function record_check(key, fence, allowed, now)
  local h = redis.call('HMGET', key, 'state', 'fence', 'owner', 'owner_until')
  if not h[1] then return {'unknown'} end
  if tonumber(h[2]) ~= tonumber(fence) or tonumber(h[4]) <= (now or now_ms()) then return {'fenced', h[3], tonumber(h[2])} end
  for _, s in ipairs(allowed) do
    if s == h[1] then return nil end
  end
  return {'state', h[1]}
end
