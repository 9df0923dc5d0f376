-- Take permits of a semaphore in Redisson's RSemaphore layout: all of them or none.
-- KEYS[1] free-permit count     KEYS[2] fencing counter     KEYS[3] this attempt's grant mark
-- KEYS[4] holder identities (_holder.lua)
-- ARGV[1] permits to take       ARGV[2] how long the grant mark lasts (ms)
-- ARGV[3] the grant's id (its mark's suffix)     ARGV[4] the holder's identity ('': none)
-- Returns {1, fence} taken, {0, -1} too few free (they come back only when someone releases) or
-- the attempt was given up before it got here, or a WRONGTYPE error.
-- Permits have no owner on the server, so the grant mark is what lets an attempt whose reply
-- was lost be undone exactly (semaphore_undo.lua): 'taken' while the permits are out, 'void'
-- once the attempt was given up.
--#include _fence
--#include _count
--#include _holder
if redis.call('exists', KEYS[3]) == 1 then
  return {0, -1}
end
local free, err = count_of(KEYS[1])
if not free then
  return err
end
if free < tonumber(ARGV[1]) then
  return {0, -1}
end
local fence = next_fence(KEYS[2])
redis.call('decrby', KEYS[1], ARGV[1])
redis.call('set', KEYS[3], 'taken', 'px', ARGV[2])
-- The permits have no lease: who took them is kept as long as the grant's mark.
holder_granted(KEYS[4], ARGV[3], ARGV[4], ARGV[2])
return {1, fence}
