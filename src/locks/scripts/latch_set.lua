-- Set a countdown latch's count if it has none (Redisson's RCountDownLatch.trySetCount), and tell
-- waiters the new count ('1' on the latch's channel, as Redisson does).
-- KEYS[1] the count     KEYS[2] the latch's channel
-- ARGV[1] count         ARGV[2] 'publish' or 'spublish'
-- Returns 1 if set, 0 if the latch exists already, or a WRONGTYPE error.
--#include _semaphore
local count, err = permits_of(KEYS[1])
if not count then
  return err
end
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], '1')
return 1
