-- Extend many leases in one call (the watchdog's batch), each only if its owner still holds it.
-- KEYS[i]      lock key of lease i
-- ARGV[3i-2]   'r' (reentrant: owner is a hash field) or 's' (simple: owner is the value)
-- ARGV[3i-1]   owner field or token
-- ARGV[3i]     new lease in ms
-- Returns an array with 1 (extended) or 0 (no longer held) per lease.
local result = {}
for i = 1, #KEYS do
  local key, kind, owner = KEYS[i], ARGV[3 * i - 2], ARGV[3 * i - 1]
  local held = false
  local t = redis.call('type', key).ok
  if kind == 'r' then
    held = t == 'hash' and redis.call('hexists', key, owner) == 1
  else
    held = t == 'string' and redis.call('get', key) == owner
  end
  if held then
    redis.call('pexpire', key, ARGV[3 * i])
    result[i] = 1
  else
    result[i] = 0
  end
end
return result
