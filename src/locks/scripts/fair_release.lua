-- Release one hold of a fair lock; at the last one, delete it and wake only the next waiter, on
-- its own channel (Redisson's: the unlock channel, ':', the waiter's owner id).
-- KEYS[1] lock hash     KEYS[2] queue list     KEYS[3] deadline zset     KEYS[4] unlock channel
-- KEYS[5] holder identities (_holder.lua)
-- ARGV[1] lease in ms   ARGV[2] owner field    ARGV[3] unlock message
-- ARGV[4] 'publish', 'spublish' on a cluster, or '' to end the hold without waking anyone
-- ARGV[5] '1' to end the owner's hold outright whatever its count (a drop), '0' for one hold
-- Returns nil if the caller does not hold it (nothing changes), 0 if holds remain (lease
-- refreshed), 1 once released.
--#include _notify
--#include _clock
--#include _waiter_queue
--#include _holder
if redis.call('type', KEYS[1]).ok ~= 'hash' or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
if ARGV[5] ~= '1' and redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  holder_extend(KEYS[5], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
holder_ended(KEYS[5], ARGV[2])
if queue_fault(KEYS[2], KEYS[3]) then
  return 1  -- released; a queue someone overwrote has nobody to wake
end
wake_first_waiter(KEYS[2], KEYS[3], ARGV[4], KEYS[4], ARGV[3])
return 1
