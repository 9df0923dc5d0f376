#!lua flags=no-writes
-- Run a caller's reads while its lock is held, so that what they return was read under the lock.
-- The no-writes flag has the server refuse any write among them, held or not: these calls may
-- run before the lock is granted (they travel right behind the first attempt).
-- The hold alone does not say which grant it is: an acquisition whose grant was undone (dead on
-- arrival, too few replicas) and made again holds with the same owner. The fencing counter does:
-- no other grant of this lock can come while the caller holds it, so the counter read here is
-- the fence of the grant these reads ran under, and the caller compares it with its lease's.
-- KEYS[1] lock key        KEYS[2] fencing counter
-- ARGV[1] the lock's layout: 'string' (holds a token) or 'hash' (owner fields)
-- ARGV[2] the caller's token or owner field
-- ARGV[3...] the reads, each as its argument count followed by its arguments
-- Returns {1, counter, {reply, ...}}, one reply per read in order (a read the server refuses
-- gives its error in its place), or {0} when the caller does not hold the lock (nothing was
-- read); the server's error if it refuses the check itself (an ACL).
--#include _guarded_read
--#include _run_commands
--#include _stop_unless_held
local counter, counter_refused = guarded_read('get', KEYS[2])
if counter_refused then
  return counter_refused
end
return {1, counter or '', run_commands(3)}
