-- Fragment: the next fencing token from the counter at `key`.
-- A counter that does not exist yet (never used, or lost to a server restart without persistence
-- or to a flush) starts from the server's clock in microseconds rather than from 0, so tokens
-- keep going up across such a loss as long as the counter handed out fewer than a million tokens
-- per second on average and the server's clock never stepped back (docs/safety.md). An existing
-- counter is only INCRed, as Redisson's fenced lock does with the same key.
local function next_fence(key)
  if redis.call('exists', key) == 0 then
    local now = redis.call('time')
    redis.call('set', key, now[1] .. string.format('%06d', tonumber(now[2])))
  end
  return redis.call('incr', key)
end
