-- Give permits back to a semaphore (Redisson's RSemaphore release: anyone may), or set or add
-- to its count, and tell waiters the new count.
-- KEYS[1] free-permit count     KEYS[2] channel
-- KEYS[3] 'release': the grant's mark, deleted; 'set' and 'add' on a leased semaphore: its
--         permits-taken set, refused first if it holds something else
-- KEYS[4] 'release': the holder identities (_holder.lua), where the grant's entry goes
-- ARGV[1] permits               ARGV[2] 'publish', 'spublish' or '' (nobody told)
-- ARGV[3] 'release' (a plain semaphore's lease), 'add' (Redisson's release, add_permits) or
--         'set' (only if the semaphore does not exist yet)
-- ARGV[4] 'release': the grant's id
-- Returns 1 + the subscribers told ('set': 0 if it existed already), or a WRONGTYPE error.
--#include _notify
--#include _count
--#include _holder
--#include _leased
if KEYS[3] and ARGV[3] ~= 'release' then
  local fault = taken_fault(KEYS[3])
  if fault then
    return fault
  end
end
local free, err = count_of(KEYS[1])
if not free then
  return err
end
if ARGV[3] == 'set' then
  if redis.call('exists', KEYS[1]) == 1 then
    return 0
  end
  redis.call('set', KEYS[1], ARGV[1])
else
  redis.call('incrby', KEYS[1], ARGV[1])
  if ARGV[3] == 'release' then
    redis.call('del', KEYS[3])
    holder_ended(KEYS[4], ARGV[4])
  end
end
if ARGV[2] == '' then
  return 1
end
return 1 + notify(ARGV[2], KEYS[2], redis.call('get', KEYS[1]))
