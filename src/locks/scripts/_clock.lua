-- Fragment: the server's clock, in ms since the epoch. Deadlines are read from the server, never
-- from a client, so clients' clocks may disagree without harm.
local function server_now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
