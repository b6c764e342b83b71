--[[
  session-ended: a turn of the session ends (one active task less; its tokens counted; the pool
  kept for affinity). A session that expired meanwhile is left gone.

  KEYS  [1] session:<id>
  ARGV  [1] tokens out ('' = ended with an error)  [2] node id  [3] pool id ('' = keep)
        [4] ttl ms  [5] active cap ms
  Reply 1 | 0 (no such session)
]]
--- @include "session"

return session_ended(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
