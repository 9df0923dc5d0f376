-- Acquire a simple lock: SET NAME token NX PX lease, the layout node-redlock, redsync and
-- redis-py use, plus a fencing token from the same counter the reentrant lock uses.
-- KEYS[1] lock key        KEYS[2] fencing counter
-- ARGV[1] token           ARGV[2] lease in ms
-- Returns {1, fence} when granted, {0, pttl} when held by someone else. A retry of an attempt
-- whose reply was lost finds its own token and is granted again without a new fence.
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('incr', KEYS[2])}
end
if redis.call('type', KEYS[1]).ok == 'string' and redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('get', KEYS[2]) or '0')}
end
return {0, redis.call('pttl', KEYS[1])}
