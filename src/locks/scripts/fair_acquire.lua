-- Acquire (or re-enter) a fair lock in Redisson's RFairLock layout, with a fencing token.
-- KEYS[1] lock hash     KEYS[2] queue list     KEYS[3] deadline zset     KEYS[4] fencing counter
-- KEYS[5] holder identities (_holder.lua)
-- ARGV[1] lease in ms   ARGV[2] owner field    ARGV[3] waiter lease in ms
-- ARGV[4] '1' to take (or keep) a place in the queue when it cannot be granted, '0' not to
-- ARGV[5] the holder's identity ('': none)
-- Returns {1, fence} granted (the lock was free and the caller first in line, or nobody was),
--         {2, fence} re-entered by its owner,
--         {0, wait}  not now: wait = the holder's remaining lease, or, when the lock is free but
--                    someone else is first in line, the time left on that waiter's place
--                    (-1: a holder without expiry),
--         a WRONGTYPE error when the name holds something that is not a lock.
--#include _notify
--#include _fence
--#include _layout
--#include _clock
--#include _waiter_queue
--#include _holder
local fault = queue_fault(KEYS[2], KEYS[3])
if fault then
  return fault
end
local now = server_now_ms()
drop_lapsed_waiters(KEYS[2], KEYS[3], now)
local kind = redis.call('type', KEYS[1]).ok
if kind == 'hash' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local fence = held_fence(KEYS[4])
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
    holder_extend(KEYS[5], ARGV[1])
  end
  return {2, fence}
end
local first = redis.call('lindex', KEYS[2], 0)
if kind == 'none' then
  if not first or first == ARGV[2] then
    local fence = next_fence(KEYS[4])
    if first then
      redis.call('lpop', KEYS[2])
    end
    redis.call('zrem', KEYS[3], ARGV[2])
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    holder_granted(KEYS[5], ARGV[2], ARGV[5], ARGV[1])
    return {1, fence}
  end
else
  local layout, what = lock_layout(KEYS[1], kind)
  if not layout then
    return not_a_lock(what)
  end
end
if ARGV[4] == '1' then
  -- A new place goes to the back; a kept one only has its deadline pushed out (the heartbeat).
  if redis.call('zadd', KEYS[3], now + tonumber(ARGV[3]), ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
  end
end
if kind ~= 'none' then
  return {0, redis.call('pttl', KEYS[1])}
end
return {0, math.max(0, tonumber(redis.call('zscore', KEYS[3], first)) - now)}
