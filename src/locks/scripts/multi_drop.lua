-- Undo a multi-lock's one call whose reply never came (it may or may not have run): the owner's
-- hold on each name the call may have granted is removed whatever its count, as
-- reentrant_drop.lua does for one name. Sent as one call with the same first key as the
-- acquisition, so it takes the same connection and runs after it (a drop per name could take
-- another connection and run first, leaving the late grant behind).
-- KEYS[2i-1] lock hash of name i     KEYS[2i] its unlock channel
-- ARGV[1] owner field     ARGV[2] unlock message     ARGV[3] 'publish' or 'spublish'
-- ARGV[3+i] '1': drop name i; '0': keep it (a hold the owner had before the call)
-- Returns how many holds were removed.
--#include _notify
local removed = 0
for i = 1, #KEYS / 2 do
  local key = KEYS[2 * i - 1]
  if ARGV[3 + i] == '1' and redis.call('type', key).ok == 'hash' and
      redis.call('hdel', key, ARGV[1]) == 1 then
    removed = removed + 1
    if redis.call('hlen', key) == 0 then
      redis.call('del', key)
      notify(ARGV[3], KEYS[2 * i], ARGV[2])
    end
  end
end
return removed
