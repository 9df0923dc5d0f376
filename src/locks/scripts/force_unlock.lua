-- Delete a lock whoever holds it, and wake its waiters.
-- KEYS[1] lock key        KEYS[2] unlock channel      ARGV[1] unlock message
-- Returns 1 if a lock was deleted, 0 if there was none.
if redis.call('del', KEYS[1]) == 0 then
  return 0
end
redis.call('publish', KEYS[2], ARGV[1])
return 1
