-- A semaphore at one instant: its free permits and, for a leased one, the permits taken.
-- KEYS[1] free-permit count     KEYS[2] permits taken (a leased semaphore's set; any key else)
-- Returns {exists (0/1), free, server time in ms, id1, expiry1, id2, expiry2, ...}, or a
-- WRONGTYPE error.
--#include _count
--#include _clock
local free, err = count_of(KEYS[1])
if not free then
  return err
end
local out = {redis.call('exists', KEYS[1]), free, server_now_ms()}
if redis.call('type', KEYS[2]).ok == 'zset' then
  local taken = redis.call('zrange', KEYS[2], 0, -1, 'withscores')
  for i = 1, #taken, 2 do
    out[#out + 1] = taken[i]
    out[#out + 1] = math.floor(tonumber(taken[i + 1]))
  end
end
return out
