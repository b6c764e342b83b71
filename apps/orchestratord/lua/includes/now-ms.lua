--[[
  now_ms() → the server's clock, ms. Redis ≥ 5 replicates a script's effects, not the script,
  so TIME is allowed before writes.
]]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
