-- Extend many read holds in one call (the watchdog's batch for one node and slot): each owner's
-- read hold keys and, if needed, the hash, only while the owner still reads.
-- KEYS[i]      lock hash of hold i
-- ARGV[2i-1]   owner id of hold i     ARGV[2i]   new lease in ms
-- Returns an array with 1 (extended) or 0 (no longer held) per hold.
--#include _keys
local result = {}
for i = 1, #KEYS do
  local key, owner, lease = KEYS[i], ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  local holds = redis.call('type', key).ok == 'hash' and tonumber(redis.call('hget', key, owner))
  if holds then
    for n = holds, 1, -1 do
      redis.call('pexpire', suffixed(key, owner .. ':rwlock_timeout:' .. n), lease)
    end
    if redis.call('pttl', key) < lease then
      redis.call('pexpire', key, lease)
    end
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
