-- Undo a multi-lock's one call whose reply never came (it may or may not have run): the owner's
-- hold on each name the call may have granted is removed whatever its count, as
-- reentrant_drop.lua does for one name. Sent as one call with the same first key as the
-- acquisition, so it takes the same connection and runs after it (a drop per name could take
-- another connection and run first, leaving the late grant behind).
-- KEYS[3i-2] lock hash of name i     KEYS[3i-1] its unlock channel
-- KEYS[3i]   its holder identities (_holder.lua), if the client records them (else two keys
--            per name)
-- ARGV[1] owner field     ARGV[2] unlock message     ARGV[3] 'publish' or 'spublish'
-- ARGV[3+i] '1': drop name i; '0': keep it (a hold the owner had before the call)
-- Returns how many holds were removed.
--#include _notify
--#include _holder
local removed = 0
-- A client that records no holders sends no record keys (_holder.lua): two keys per name.
local n = #ARGV - 3
local stride = #KEYS / n
for i = 1, n do
  local key = KEYS[stride * i - stride + 1]
  if ARGV[3 + i] == '1' and redis.call('type', key).ok == 'hash' and
      redis.call('hdel', key, ARGV[1]) == 1 then
    removed = removed + 1
    holder_ended(stride == 3 and KEYS[3 * i] or nil, ARGV[1])
    if redis.call('hlen', key) == 0 then
      redis.call('del', key)
      notify(ARGV[3], KEYS[stride * i - stride + 2], ARGV[2])
    end
  end
end
return removed
