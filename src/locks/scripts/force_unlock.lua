-- Delete a lock whoever holds it, and wake its waiters. Only locks are deleted: a key that is not
-- in a lock's layout is refused, and so is one in a lock's layout without an expiry unless the
-- caller confirms the kind, since data can look like a lock; a counter is never a lock.
-- KEYS[1] lock key        KEYS[2] fencing counter     KEYS[3] unlock channel
-- ARGV[1] unlock message  ARGV[2] the kind the caller confirms: '' or the key's TYPE
-- ARGV[3] 'publish', or 'spublish' on a cluster (sharded pub/sub, as Redisson on Redis 7)
-- Returns the lock as it was, as _snapshot.lua describes ({'none', 'none', -2, fence} if there
-- was none), or a WRONGTYPE error saying why nothing was deleted.
--#include _layout
--#include _snapshot
local kind, layout, state = snapshot(KEYS[1], KEYS[2])
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
redis.call(ARGV[3], KEYS[3], ARGV[1])
return state
