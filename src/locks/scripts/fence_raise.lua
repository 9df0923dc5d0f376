-- RedLock's fencing write-back: raise a master's fencing counter to at least the token a grant
-- is about to hand out (the largest its majority drew), so that whichever majority the next
-- grant wins, one of its masters already counts past this token (docs/redlock.md).
-- KEYS[1] fencing counter     ARGV[1] the token, in decimal
-- Returns the counter's value afterwards. Never lowers it.
-- A counter kept for good (by an earlier version, or Redisson) stays so. Any other is kept a
-- full day from the raise, not for what was left of its own day: the token may come from
-- another master's clock, ahead of this one's, and when this counter starts again from its own
-- clock, that clock must have passed the token. A day from the raise leaves it a day's margin,
-- as a counter's own start does (_fence.lua).
--#include _fence
local current = tonumber(redis.call('get', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if current < token then
  if redis.call('pttl', KEYS[1]) == -1 then
    redis.call('set', KEYS[1], ARGV[1])
  else
    redis.call('set', KEYS[1], ARGV[1], 'px', counter_retention_ms)
  end
  return token
end
return current
