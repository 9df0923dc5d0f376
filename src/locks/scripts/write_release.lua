-- Release one write hold (or, ARGV[4] = '1', all of them) of a read-write lock. At the last one,
-- the lock is deleted and every waiter woken, or, if the writer still reads (a downgrade), it
-- becomes a read lock.
-- KEYS[1] lock hash     KEYS[2] channel     KEYS[3] holder identities (_holder.lua)
-- ARGV[1] unlock message ('1': wakes all)  ARGV[2] writer field    ARGV[3] 'publish', ... or ''
-- ARGV[4] '1' to end the hold outright      ARGV[5] lease in ms (kept when holds remain)
-- Returns nil if the caller holds no write hold, 0 if write holds remain, 1 + the subscribers
-- told once released.
--#include _notify
--#include _holder
if redis.call('type', KEYS[1]).ok ~= 'hash' or redis.call('hget', KEYS[1], 'mode') ~= 'write' or
   redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
if ARGV[4] ~= '1' and redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[5])
  holder_extend(KEYS[3], ARGV[5])
  return 0
end
redis.call('hdel', KEYS[1], ARGV[2])
holder_ended(KEYS[3], ARGV[2])
if redis.call('hlen', KEYS[1]) > 1 then
  redis.call('hset', KEYS[1], 'mode', 'read')
  -- Readers wait for writers only: let them in.
  if ARGV[3] ~= '' then
    return 1 + notify(ARGV[3], KEYS[2], ARGV[1])
  end
  return 1
end
redis.call('del', KEYS[1])
if ARGV[3] ~= '' then
  return 1 + notify(ARGV[3], KEYS[2], ARGV[1])
end
return 1
