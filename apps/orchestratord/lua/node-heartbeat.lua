--[[
  node-heartbeat: a registered node is online, seen now (or when it sent the heartbeat, when that
  is plausible: the rule of liveness.ts's lastSeenOf), with these pools, and with this on-demand
  memory when the heartbeat reports one (the hash's `memory` then overrides the registration's).

  KEYS  [1] nodes:live  [2] node:<id>
  ARGV  [1] id  [2] pools json  [3] sent-at ms ('' = none)  [4] heartbeat interval ms
        [5] memory json ('' = none reported: the last report stands)
  Reply the previous state | nil (unknown node: nothing changed)
]]
--- @include "now-ms"

local prev = redis.call('HGET', KEYS[2], 'state')
if not prev then return false end
local now = now_ms()
local seen = now
if ARGV[3] ~= '' then
  local sent = tonumber(ARGV[3])
  local plausible = math.min(tonumber(ARGV[4]) / 4, 1000)
  if sent <= now and now - sent <= plausible then seen = sent end
end
if prev ~= 'online' then redis.call('HSET', KEYS[2], 'state_since', now) end
redis.call('HSET', KEYS[2], 'state', 'online', 'last_seen', seen, 'pools', ARGV[2])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[2], 'memory', ARGV[5]) end
redis.call('ZADD', KEYS[1], seen, ARGV[1])
return prev
