-- Remove an owner's hold entirely, whatever its count: used when a grant's outcome is unknown
-- (the reply was lost) or when a lease was declared lost, so the lock cannot linger for a
-- holder that no longer believes it holds it.
-- KEYS[1] lock hash       KEYS[2] unlock channel      KEYS[3] holder identities (_holder.lua)
-- ARGV[1] owner field     ARGV[2] unlock message     ARGV[3] 'publish', 'spublish' or '' (none)
-- Returns 1 if the owner's entry was removed, 0 if it was not there.
--#include _notify
--#include _holder
if redis.call('type', KEYS[1]).ok ~= 'hash' or redis.call('hdel', KEYS[1], ARGV[1]) == 0 then
  return 0
end
holder_ended(KEYS[3], ARGV[1])
if redis.call('hlen', KEYS[1]) == 0 then
  redis.call('del', KEYS[1])
  if ARGV[3] ~= '' then
    notify(ARGV[3], KEYS[2], ARGV[2])
  end
end
return 1
