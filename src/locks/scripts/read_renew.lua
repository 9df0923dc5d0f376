-- Extend many read holds in one call (the watchdog's batch for one node and slot): each owner's
-- read hold keys and, if needed, the hash, only while the owner still reads.
-- KEYS[2i-1]   lock hash of hold i      KEYS[2i]   its holder identities (_holder.lua), if
--              the client records them; else KEYS[i] is hold i's lock
-- ARGV[2i-1]   owner id of hold i     ARGV[2i]   new lease in ms
-- Returns an array with 1 (extended) or 0 (no longer held) per hold.
--#include _keys
--#include _holder
local result = {}
-- A client that records no holders sends no record keys (_holder.lua).
local stride = #KEYS == #ARGV and 2 or 1
for i = 1, #ARGV / 2 do
  local key, owner, lease = KEYS[stride * i - stride + 1], ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  local holds = redis.call('type', key).ok == 'hash' and tonumber(redis.call('hget', key, owner))
  if holds then
    for n = holds, 1, -1 do
      redis.call('pexpire', suffixed(key, owner .. ':rwlock_timeout:' .. n), lease)
    end
    if redis.call('pttl', key) < lease then
      redis.call('pexpire', key, lease)
    end
    holder_extend((stride == 2 and KEYS[2 * i] or nil), lease)
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
