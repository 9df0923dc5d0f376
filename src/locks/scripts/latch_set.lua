-- Sets a countdown latch's count if it has none (Redisson's RCountDownLatch.trySetCount), and
-- tells waiters a new count began: '1' on the latch's channel, Redisson's "new count" message
-- (Redisson's waiters wait on; dlock's ignore it).
-- KEYS[1] the count     KEYS[2] the latch's channel
-- ARGV[1] the count (at least 1)     ARGV[2] 'publish' or 'spublish'
-- Returns 1 if it set the count, 0 if the latch exists already; when the name holds something
-- that is not a count, an error "WRONGTYPE holds ..., not a count" and nothing changes.
--#include _notify
--#include _count
local count, err = count_of(KEYS[1])
if not count then
  return err
end
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('set', KEYS[1], ARGV[1])
  notify(ARGV[2], KEYS[2], '1')
  return 1
end
return 0
