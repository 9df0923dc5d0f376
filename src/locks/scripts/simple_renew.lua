-- Extend many simple locks in one call (the watchdog's batch for one node and slot), each only if
-- it still holds its holder's token.
-- KEYS[i]      lock key of hold i
-- ARGV[2i-1]   token of hold i
-- ARGV[2i]     new lease in ms
-- Returns an array with 1 (extended) or 0 (no longer held) per hold.
local result = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  if redis.call('type', key).ok == 'string' and redis.call('get', key) == ARGV[2 * i - 1] then
    redis.call('pexpire', key, ARGV[2 * i])
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
