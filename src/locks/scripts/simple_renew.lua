-- Extend many simple locks in one call (the watchdog's batch for one node and slot), each only if
-- it still holds its holder's token.
-- KEYS[2i-1]   lock key of hold i
-- KEYS[2i]     its holder identities (_holder.lua), if the client records them; else
--              KEYS[i] is hold i's lock
-- ARGV[2i-1]   token of hold i
-- ARGV[2i]     new lease in ms
-- Returns an array with 1 (extended) or 0 (no longer held) per hold.
--#include _holder
local result = {}
-- A client that records no holders sends no record keys (_holder.lua).
local stride = #KEYS == #ARGV and 2 or 1
for i = 1, #ARGV / 2 do
  local key = KEYS[stride * i - stride + 1]
  if redis.call('type', key).ok == 'string' and redis.call('get', key) == ARGV[2 * i - 1] then
    redis.call('pexpire', key, ARGV[2 * i])
    holder_extend((stride == 2 and KEYS[2 * i] or nil), ARGV[2 * i])
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
