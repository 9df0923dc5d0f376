-- Release one hold of a reentrant lock; at the last one, delete it and wake waiters.
-- KEYS[1] lock hash       KEYS[2] unlock channel      KEYS[3] holder identities (_holder.lua)
-- ARGV[1] lease in ms     ARGV[2] owner field        ARGV[3] unlock message
-- ARGV[4] 'publish', or 'spublish' on a cluster
-- Returns nil if the caller does not hold it (nothing changes), 0 if holds remain (lease
-- refreshed), or 1 + the number of subscribers the unlock message reached; the server's error
-- if it refuses the read (an ACL).
--#include _notify
--#include _guarded_read
--#include _holder
-- The hold count read first: the last hold (the usual release) is deleted without counting it
-- down, one command fewer.
local count, refused = guarded_read('hget', KEYS[1], ARGV[2])
if refused then
  return refused
end
if not count then
  return nil
end
if count ~= '1' and redis.call('hincrby', KEYS[1], ARGV[2], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  holder_extend(KEYS[3], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
holder_ended(KEYS[3], ARGV[2])
return 1 + notify(ARGV[4], KEYS[2], ARGV[3])
