-- Run a caller's writes only while its lock is held, in the same atomic step as the check: a
-- holder whose lease ran out (a pause, a stalled server, a force-unlock) writes nothing once
-- the lock may be someone else's. The check is the one a release makes (the token, or the owner
-- field), so it holds across re-entries and renewals.
-- KEYS[1] lock key
-- ARGV[1] the lock's layout: 'string' (holds a token) or 'hash' (owner fields)
-- ARGV[2] the caller's token or owner field
-- ARGV[3...] the writes, each as its argument count followed by its arguments
-- Returns {1, {reply, ...}}, one reply per write in order (a write the server refuses gives its
-- error in its place and, as in MULTI/EXEC, undoes nothing), or {0} when the caller does not
-- hold the lock (nothing was written); the server's error if it refuses the check itself.
--#include _guarded_read
--#include _held_by
local held, refused = held_by(ARGV[1], KEYS[1], ARGV[2])
if refused then
  return refused
end
if not held then
  return {0}
end
local replies = {}
local i = 3
while i <= #ARGV do
  local count = tonumber(ARGV[i])
  replies[#replies + 1] = redis.pcall(unpack(ARGV, i + 1, i + count))
  i = i + count + 1
end
return {1, replies}
