-- RedLock's fencing write-back: raise a master's fencing counter to at least the token a grant
-- is about to hand out (the largest its majority drew), so that whichever majority the next
-- grant wins, one of its masters already counts past this token (docs/redlock.md).
-- KEYS[1] fencing counter     ARGV[1] the token, in decimal
-- Returns the counter's value afterwards. Never lowers it.
local current = tonumber(redis.call('get', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if current < token then
  redis.call('set', KEYS[1], ARGV[1])
  return token
end
return current
