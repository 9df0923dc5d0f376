-- Release one read hold (or, ARGV[4] = '1', all of an owner's read holds) of a read-write lock.
-- Its timeout key goes; the hash then lives as long as the longest remaining read hold, or is
-- deleted, waking waiters, when nobody holds it.
-- KEYS[1] lock hash     KEYS[2] channel     KEYS[3] holder identities (_holder.lua)
-- ARGV[1] unlock message ('0')     ARGV[2] owner id     ARGV[3] 'publish', 'spublish' or ''
-- ARGV[4] '1' to end every read hold of the owner
-- Returns nil if the owner holds no read hold (nothing changes), 0 if the lock is still held
-- (by this owner or others), 1 + the subscribers told once nobody holds it.
--#include _notify
--#include _keys
--#include _holder
if redis.call('type', KEYS[1]).ok ~= 'hash' or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local count = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
local keep = ARGV[4] == '1' and 0 or count - 1
for n = count, keep + 1, -1 do
  redis.call('del', suffixed(KEYS[1], ARGV[2] .. ':rwlock_timeout:' .. n))
end
if keep > 0 then
  redis.call('hset', KEYS[1], ARGV[2], keep)
else
  redis.call('hdel', KEYS[1], ARGV[2])
  holder_ended(KEYS[3], ARGV[2])
end
local mode = redis.call('hget', KEYS[1], 'mode')
if redis.call('hlen', KEYS[1]) > 1 then
  -- Holds remain: the hash lasts as long as the longest read hold left (a writer's own lease
  -- is the hash's, which stays as it is).
  local longest = -3
  local fields = redis.call('hgetall', KEYS[1])
  for i = 1, #fields, 2 do
    local holds = tonumber(fields[i + 1])
    if holds then
      for n = holds, 1, -1 do
        longest = math.max(longest, redis.call('pttl', suffixed(KEYS[1], fields[i] .. ':rwlock_timeout:' .. n)))
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest)
    -- One holder left: if it is upgrading to the write lock, this is what it waits for.
    if redis.call('hlen', KEYS[1]) == 2 and ARGV[3] ~= '' then
      notify(ARGV[3], KEYS[2], ARGV[1])
    end
    return 0
  end
  if mode == 'write' then
    return 0
  end
end
redis.call('del', KEYS[1])
if ARGV[3] ~= '' then
  return 1 + notify(ARGV[3], KEYS[2], ARGV[1])
end
return 1
