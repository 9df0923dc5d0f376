-- Acquire a simple lock: SET NAME token NX PX lease, the layout node-redlock, redsync and
-- redis-py use, plus a fencing token from the same counter the reentrant lock uses.
-- KEYS[1] lock key        KEYS[2] fencing counter
-- ARGV[1] token           ARGV[2] lease in ms
-- Returns {1, fence} when granted, {0, pttl} when another lock holds it, a WRONGTYPE error when
-- the name holds something that is not a lock. A retry of an attempt whose reply was lost finds
-- its own token and is granted again without a new fence.
--#include _fence
--#include _layout
-- The token is drawn before the lock is written: a script that fails half-way (an ACL that
-- forbids INCR, say) must not leave a lock nobody was told about. Nothing runs between the
-- EXISTS and the SET inside one script.
if redis.call('exists', KEYS[1]) == 0 then
  local fence = next_fence(KEYS[2])
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, fence}
end
local kind = redis.call('type', KEYS[1]).ok
if kind == 'string' and redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('get', KEYS[2]) or '0')}
end
local layout, what = lock_layout(KEYS[1], kind)
if not layout then
  return not_a_lock(what)
end
return {0, redis.call('pttl', KEYS[1])}
