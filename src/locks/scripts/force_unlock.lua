-- Delete a lock whoever holds it, and wake its waiters. Only locks are deleted: a key that is not
-- in a lock's layout is refused, and so is one in a lock's layout without an expiry unless the
-- caller confirms the kind, since data can look like a lock; a counter is never a lock.
-- Waiters of every kind are woken, whatever kind the caller took the lock for: those on the
-- lock's channel, and a fair lock's first living waiter, who listens on a channel of its own.
-- KEYS[1] lock key        KEYS[2] fencing counter     KEYS[3] unlock channel
-- KEYS[4] the name's fair queue (list)                KEYS[5] the fair queue's deadlines (zset)
-- KEYS[6] holder identities (_holder.lua), if the client records them: deleted with the lock
-- ARGV[1] unlock message  ARGV[2] the kind the caller confirms: '' or the key's TYPE
-- ARGV[3] 'publish', or 'spublish' on a cluster (sharded pub/sub, as Redisson on Redis 7)
-- Returns the lock as it was, as _snapshot.lua describes ({'none', 'none', -2, fence} if there
-- was none), or a WRONGTYPE error saying why nothing was deleted.
--#include _notify
--#include _layout
--#include _snapshot
--#include _clock
--#include _waiter_queue
local kind, layout, state = snapshot(KEYS[1], KEYS[2], KEYS[4], KEYS[6])
if kind == 'none' then
  return state
end
if not layout then
  return not_a_lock(state[2])
end
if layout == 'lock_no_ttl' then
  if kind == 'string' and string.match(redis.call('get', KEYS[1]), '^%d+$') then
    return not_a_lock('a counter')
  end
  if ARGV[2] ~= kind then
    return redis.error_reply('WRONGTYPE holds a ' .. kind .. " in a lock's layout but without " ..
                             'an expiry; not deleted unless its kind is confirmed')
  end
end
redis.call('del', KEYS[1])
if KEYS[6] then
  redis.pcall('del', KEYS[6])
end
notify(ARGV[3], KEYS[3], ARGV[1])
if not queue_fault(KEYS[4], KEYS[5]) then
  wake_first_waiter(KEYS[4], KEYS[5], ARGV[3], KEYS[3], ARGV[1])
end
return state
