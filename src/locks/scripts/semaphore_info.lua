-- A semaphore at one instant: its free permits and, for a leased one, the permits taken.
-- KEYS[1] free-permit count     KEYS[2] permits taken (a leased semaphore's set; any key else)
-- KEYS[3] holder identities (_holder.lua), if the client reads them
-- Returns {exists (0/1), free, server time in ms, {id1, expiry1, id2, expiry2, ...},
-- {holder field1, identity1, ...}}, or a WRONGTYPE error.
--#include _count
--#include _clock
local free, err = count_of(KEYS[1])
if not free then
  return err
end
local leased = {}
if redis.call('type', KEYS[2]).ok == 'zset' then
  local taken = redis.call('zrange', KEYS[2], 0, -1, 'withscores')
  for i = 1, #taken, 2 do
    leased[#leased + 1] = taken[i]
    leased[#leased + 1] = math.floor(tonumber(taken[i + 1]))
  end
end
local holders = KEYS[3] and redis.pcall('hgetall', KEYS[3])
if type(holders) ~= 'table' or holders.err then
  holders = {}
end
return {redis.call('exists', KEYS[1]), free, server_now_ms(), leased, holders}
