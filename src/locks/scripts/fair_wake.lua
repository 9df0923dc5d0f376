-- Tell the first living waiter of a fair lock that the lock is free (after a force-unlock, which
-- publishes on the lock's channel, where fair waiters do not listen: each has its own).
-- KEYS[1] lock hash     KEYS[2] queue list     KEYS[3] deadline zset     KEYS[4] unlock channel
-- ARGV[1] unlock message       ARGV[2] 'publish' or 'spublish'
-- Returns 1 if a waiter was told, 0 if the lock is held or nobody waits.
--#include _clock
--#include _waiter_queue
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
drop_lapsed_waiters(KEYS[2], KEYS[3], server_now_ms())
local next_waiter = redis.call('lindex', KEYS[2], 0)
if not next_waiter then
  return 0
end
redis.call(ARGV[2], KEYS[4] .. ':' .. next_waiter, ARGV[1])
return 1
