-- Counts a countdown latch down by one (Redisson's countDown), deletes it ('all': remove), or
-- reads it ('read': what waits and count() see). When the count reaches 0 the key is deleted
-- and '0' is published on the latch's channel: every waiter wakes, dlock's and Redisson's. A
-- latch that does not exist stays so; it counts as 0.
-- KEYS[1] the count     KEYS[2] the latch's channel
-- ARGV[1] 'publish' or 'spublish'     ARGV[2] 'one', 'all' or 'read'
-- Returns, for 'one', the count left (0 once reached, and for a latch that did not exist); for
-- 'all', 1 if the latch existed, else 0; for 'read', the count as stored, or nil. When the name
-- holds something that is not a count: an error "WRONGTYPE holds ..., not a count", and nothing
-- changes.
--#include _notify
--#include _count
local count, err = count_of(KEYS[1])
if not count then
  return err
end
if redis.call('exists', KEYS[1]) == 0 then
  if ARGV[2] == 'read' then
    return false
  end
  return 0
end
if ARGV[2] == 'read' then
  return redis.call('get', KEYS[1])
end
if ARGV[2] == 'all' then
  redis.call('del', KEYS[1])
  -- Redisson's delete publishes '1', which leaves its waiters waiting on a latch that is gone;
  -- '0' wakes them, and they find the count 0.
  notify(ARGV[1], KEYS[2], '0')
  return 1
end
local left = redis.call('decr', KEYS[1])
-- As Redisson: deleted at 0 or below, announced at exactly 0 (below 0 it was announced already,
-- or never was a count someone waits for).
if left <= 0 then
  redis.call('del', KEYS[1])
end
if left == 0 then
  notify(ARGV[1], KEYS[2], '0')
end
return math.max(left, 0)
