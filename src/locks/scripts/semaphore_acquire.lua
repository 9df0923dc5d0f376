-- Take permits of a semaphore in Redisson's RSemaphore layout: all of them or none.
-- KEYS[1] free-permit count     KEYS[2] fencing counter
-- ARGV[1] permits to take
-- Returns {1, fence} taken, {0, -1} too few free (they come back only when someone releases),
-- or a WRONGTYPE error.
--#include _fence
--#include _count
local free, err = count_of(KEYS[1])
if not free then
  return err
end
if free < tonumber(ARGV[1]) then
  return {0, -1}
end
local fence = next_fence(KEYS[2])
redis.call('decrby', KEYS[1], ARGV[1])
return {1, fence}
