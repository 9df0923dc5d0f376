-- Delete a lock whoever holds it, and wake its waiters. Keys that are not locks are refused.
-- KEYS[1] lock key        KEYS[2] fencing counter     KEYS[3] unlock channel
-- ARGV[1] unlock message
-- Returns the lock as it was, as _snapshot.lua describes ({'none', -2, fence} if there was none).
--#include _snapshot
local kind, state = snapshot(KEYS[1], KEYS[2])
if kind ~= 'none' and kind ~= 'hash' and kind ~= 'string' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a lock')
end
if kind ~= 'none' then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[3], ARGV[1])
end
return state
