-- Acquire (or re-enter) a reentrant lock in Redisson's RLock layout, with a fencing token.
-- KEYS[1] lock hash       KEYS[2] fencing counter
-- ARGV[1] lease in ms     ARGV[2] owner field "<client-uuid>:<thread-or-owner-id>"
-- Returns {1, fence} for a new grant (fence = INCR of the counter),
--         {2, fence} for a re-entry by the same owner (same hold, same fence; the lease is only
--                    ever extended, so the holder's idea of its validity stays on the safe side),
--         {0, pttl}  when someone else holds it (pttl -1: the key has no expiry).
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {1, redis.call('incr', KEYS[2])}
end
if kind == 'hash' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  return {2, tonumber(redis.call('get', KEYS[2]) or '0')}
end
return {0, redis.call('pttl', KEYS[1])}
