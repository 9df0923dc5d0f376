-- Acquire (or re-enter) the read side of a read-write lock in Redisson's RReadWriteLock layout:
-- the hash NAME holds `mode` ('read' or 'write'), each reader's hold count under its owner id and
-- the writer's under '<owner>:write'; each read hold n also has its own key
-- `{NAME}:<owner>:rwlock_timeout:<n>` carrying that hold's lease (a hash has one TTL), and the
-- hash lives as long as its longest hold.
-- KEYS[1] lock hash     KEYS[2] fencing counter     KEYS[3] writers' intent key
-- KEYS[4] holder identities (_holder.lua)
-- ARGV[1] lease in ms   ARGV[2] owner id            ARGV[3] the holder's identity ('': none)
-- Returns {1, fence} a new read hold for this owner, {2, fence} another hold of an owner that
-- reads already, {0, wait} not now (a writer holds it, or waits for it: dlock's readers let a
-- waiting writer go first), or a WRONGTYPE error.
--#include _fence
--#include _layout
--#include _keys
--#include _holder
local kind = redis.call('type', KEYS[1]).ok
local mode = false
if kind == 'hash' and is_read_write_lock(KEYS[1]) then
  mode = redis.call('hget', KEYS[1], 'mode')
end
if kind ~= 'none' and not mode then
  local layout, what = lock_layout(KEYS[1], kind)
  return not_a_lock(layout and 'another kind of lock' or what)
end
local reading = mode and redis.call('hexists', KEYS[1], ARGV[2]) == 1
local writing = mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 1
if mode == 'write' and not writing then
  return {0, redis.call('pttl', KEYS[1])}
end
if not reading and not writing and redis.call('exists', KEYS[3]) == 1 then
  local left = redis.call('pttl', KEYS[1])
  return {0, left > 0 and left or redis.call('pttl', KEYS[3])}
end
local fence
if reading or writing then
  fence = held_fence(KEYS[2])
else
  fence = next_fence(KEYS[2])
end
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('set', suffixed(KEYS[1], ARGV[2] .. ':rwlock_timeout:' .. n), 1, 'px', ARGV[1])
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('pexpire', KEYS[1], ARGV[1])
end
if reading then
  holder_extend(KEYS[4], ARGV[1])
else
  holder_granted(KEYS[4], ARGV[2], ARGV[3], ARGV[1])
end
return {(reading or writing) and 2 or 1, fence}
