-- Acquire a simple lock: SET NAME token NX PX lease, the layout node-redlock, redsync and
-- redis-py use, plus a fencing token from the same counter the reentrant lock uses.
-- KEYS[1] lock key        KEYS[2] fencing counter     KEYS[3] holder identities (_holder.lua)
-- ARGV[1] token           ARGV[2] lease in ms         ARGV[3] the holder's identity ('': none)
-- Returns {1, fence} when granted, {0, pttl} when another lock holds it, a WRONGTYPE error when
-- the name holds something that is not a lock. A retry of an attempt whose reply was lost finds
-- its own token and is granted again without a new fence (unless the counter was lost meanwhile:
-- held_fence in _fence.lua).
--#include _fence
--#include _layout
--#include _holder
-- The lock is written first, with the SET NX PX the other libraries send, and the fencing token
-- drawn after: one command fewer on the path every free lock takes than testing the key first.
-- If drawing the token fails (an ACL that forbids INCR, say), the lock is deleted again before
-- the error goes back, so nobody holds a lock nobody was told about. The key did not exist, so
-- the DEL loses nothing; nothing else runs inside one script.
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local drawn, fence = pcall(next_fence, KEYS[2])
  if not drawn then
    redis.call('del', KEYS[1])
    -- Redis 7 raises the server's error as a table; older servers may raise its text.
    return redis.error_reply(type(fence) == 'table' and fence.err or tostring(fence))
  end
  holder_granted(KEYS[3], ARGV[1], ARGV[3], ARGV[2])
  return {1, fence}
end
local kind = redis.call('type', KEYS[1]).ok
local value
if kind == 'string' then
  value = redis.call('get', KEYS[1])
  if value == ARGV[1] then
    local fence = held_fence(KEYS[2])
    redis.call('pexpire', KEYS[1], ARGV[2])
    holder_extend(KEYS[3], ARGV[2])
    return {1, fence}
  end
end
local layout, what, pttl = lock_layout(KEYS[1], kind, value)
if not layout then
  return not_a_lock(what)
end
return {0, pttl}
