-- A fair-lock waiter that gives up leaves the queue; if it was first in line and the lock is
-- free, the next waiter is told it is its turn.
-- KEYS[1] lock hash     KEYS[2] queue list     KEYS[3] deadline zset     KEYS[4] unlock channel
-- ARGV[1] owner field   ARGV[2] unlock message ARGV[3] 'publish' or 'spublish'
-- Returns 1 if it had a place, 0 if not.
--#include _notify
--#include _clock
--#include _waiter_queue
if queue_fault(KEYS[2], KEYS[3]) then
  return 0
end
local was_first = redis.call('lindex', KEYS[2], 0) == ARGV[1]
if redis.call('zrem', KEYS[3], ARGV[1]) == 0 then
  return 0
end
redis.call('lrem', KEYS[2], 0, ARGV[1])
if was_first and redis.call('exists', KEYS[1]) == 0 then
  wake_first_waiter(KEYS[2], KEYS[3], ARGV[3], KEYS[4], ARGV[2])
end
return 1
