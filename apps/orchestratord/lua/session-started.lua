--[[
  session-started: a turn of the session starts (one more active task; the key lives `cap` from now).

  KEYS  [1] session:<id>
  ARGV  [1] active cap ms
  Reply 1
]]
--- @include "session"

session_started(KEYS[1], ARGV[1])
return 1
