-- Acquire (or re-enter) a reentrant lock in Redisson's RLock layout, with a fencing token.
-- KEYS[1] lock hash       KEYS[2] fencing counter     KEYS[3] holder identities (_holder.lua)
-- ARGV[1] lease in ms     ARGV[2] owner field "<client-uuid>:<thread-or-owner-id>"
-- ARGV[3] the holder's identity ('' to record none)
-- Returns {1, fence} for a new grant (fence = the counter's next value, see _fence.lua),
--         {2, fence} for a re-entry by the same owner (same hold, same fence, or a new one if the
--                    counter was lost: held_fence in _fence.lua; the lease is only ever
--                    extended, so the holder's idea of its validity stays on the safe side),
--         {0, pttl}  when another lock holds it (pttl -1: the key has no expiry),
--         a WRONGTYPE error when the name holds something that is not a lock.
--#include _fence
--#include _layout
--#include _holder
-- The token is drawn before the lock is written: a script that fails half-way (an ACL that
-- forbids INCR, say) must not leave a lock nobody was told about.
if redis.call('exists', KEYS[1]) == 0 then
  local fence = next_fence(KEYS[2])
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  holder_granted(KEYS[3], ARGV[2], ARGV[3], ARGV[1])
  return {1, fence}
end
local kind = redis.call('type', KEYS[1]).ok
if kind == 'hash' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local fence = held_fence(KEYS[2])
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
    holder_extend(KEYS[3], ARGV[1])
  end
  return {2, fence}
end
local layout, what, pttl = lock_layout(KEYS[1], kind)
if not layout then
  return not_a_lock(what)
end
return {0, pttl}
