-- Release a simple lock if the caller's token still holds it (compare-and-delete).
-- KEYS[1] lock key        KEYS[2] unlock channel      KEYS[3] holder identities (_holder.lua)
-- ARGV[1] token           ARGV[2] unlock message     ARGV[3] 'publish', 'spublish' or '' (none)
-- Returns nil if the token does not hold it (nothing changes), else 1 + the number of
-- subscribers the unlock message reached; the server's error if it refuses the read (an ACL).
--#include _notify
--#include _guarded_read
--#include _holder
local value, refused = guarded_read('get', KEYS[1])
if refused then
  return refused
end
if value ~= ARGV[1] then
  return nil
end
redis.call('del', KEYS[1])
holder_ended(KEYS[3], ARGV[1])
if ARGV[3] == '' then
  return 1
end
return 1 + notify(ARGV[3], KEYS[2], ARGV[2])
