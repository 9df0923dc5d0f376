-- Count a latch down by one (Redisson's countDown), or ARGV[2] = 'all': delete it. When it reaches
-- 0 the key is deleted and '0' is published, waking every waiter; a latch that does not exist
-- stays so.
-- KEYS[1] the count     KEYS[2] the latch's channel
-- ARGV[1] 'publish' or 'spublish'      ARGV[2] 'one' or 'all'
-- Returns the count left (0 once reached), -1 for 'all' on a latch that did not exist, or a
-- WRONGTYPE error.
--#include _semaphore
local count, err = permits_of(KEYS[1])
if not count then
  return err
end
if redis.call('exists', KEYS[1]) == 0 then
  return ARGV[2] == 'all' and -1 or 0
end
local left = ARGV[2] == 'all' and 0 or redis.call('decr', KEYS[1])
if left <= 0 then
  redis.call('del', KEYS[1])
  redis.call(ARGV[1], KEYS[2], '0')
  return 0
end
return left
