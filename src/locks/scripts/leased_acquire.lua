-- Take leased permits of a semaphore in Redisson's RPermitExpirableSemaphore layout: the string
-- NAME counts free permits, the sorted set `{NAME}:timeout` holds each permit taken (its random
-- 16-byte id) scored by its expiry in server time (ms). Expired permits are reclaimed first.
-- KEYS[1] free-permit count     KEYS[2] permits taken      KEYS[3] fencing counter
-- KEYS[4] channel               KEYS[5] holder identities (_holder.lua), one entry per permit id
-- ARGV[1] the new permits' ids, 16 bytes each, concatenated      ARGV[2] lease in ms
-- ARGV[3] 'publish' or 'spublish'                                ARGV[4] the holder's identity
-- Returns {1, fence} taken, {0, wait} too few free (wait: ms until the nearest permit expires,
-- -1 if none will), or a WRONGTYPE error.
--#include _notify
--#include _fence
--#include _count
--#include _clock
--#include _holder
--#include _leased
local fault = taken_fault(KEYS[2])
if fault then
  return fault
end
local free, err = count_of(KEYS[1])
if not free then
  return err
end
local now = server_now_ms()
free = reclaim_expired(KEYS[1], KEYS[2], KEYS[5], KEYS[4], ARGV[3], now, free)
local wanted = #ARGV[1] / 16
if free < wanted then
  local nearest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
  if #nearest == 0 then
    return {0, -1}
  end
  return {0, math.max(1, tonumber(nearest[2]) - now)}
end
local fence = next_fence(KEYS[3])
redis.call('decrby', KEYS[1], wanted)
local expiry = now + tonumber(ARGV[2])
for i = 1, #ARGV[1], 16 do
  local id = string.sub(ARGV[1], i, i + 15)
  redis.call('zadd', KEYS[2], expiry, id)
  holder_granted(KEYS[5], id, ARGV[4], ARGV[2])
end
return {1, fence}
