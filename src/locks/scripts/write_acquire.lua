-- Acquire (or re-enter) the write side of a read-write lock in Redisson's RReadWriteLock layout
-- (see read_acquire.lua), or upgrade the caller's read hold to it.
-- KEYS[1] lock hash     KEYS[2] fencing counter     KEYS[3] writers' intent key
-- KEYS[4] holder identities (_holder.lua)
-- ARGV[1] lease in ms   ARGV[2] writer field '<owner>:write'   ARGV[3] waiter lease in ms
-- ARGV[4] '1' to mark (or keep) the intent to write when it cannot be granted, so that new
--         readers wait; '0' not to      ARGV[5] '1' for an upgrade of the owner's read hold
-- ARGV[6] the holder's identity ('': none)
-- The intent key holds 'write:<field>' for a waiting writer and 'upgrade:<field>' for an
-- upgrading reader; an upgrade takes it over from a plain writer (who could not proceed before
-- the upgrader's read hold ends anyway), never from another upgrader: that one is refused.
-- Returns {1, fence} granted, {2, fence} re-entered, {0, wait} not now, a WRONGTYPE error, or an
-- UPGRADECONFLICT error.
--#include _fence
--#include _layout
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
local upgrade = ARGV[5] == '1'
local reader = string.sub(ARGV[2], 1, #ARGV[2] - #':write')
local function ours(intent)
  return intent == 'write:' .. ARGV[2] or intent == 'upgrade:' .. ARGV[2]
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local fence = held_fence(KEYS[2])
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
    holder_extend(KEYS[4], ARGV[1])
  end
  return {2, fence}
end
local intent = redis.call('get', KEYS[3])
if upgrade then
  if redis.call('hexists', KEYS[1], reader) == 0 then
    return redis.error_reply('ERR the upgrade needs a read hold of the same owner')
  end
  if intent and string.sub(intent, 1, 8) == 'upgrade:' and not ours(intent) then
    return redis.error_reply('UPGRADECONFLICT another holder is already upgrading to the write lock')
  end
end
-- Free for us: nobody holds it, or (an upgrade) the only holder is our own read hold.
local free = not mode or
  (upgrade and mode == 'read' and redis.call('hlen', KEYS[1]) == 2)
if free and (not intent or ours(intent) or upgrade) then
  local fence = next_fence(KEYS[2])
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  if intent and ours(intent) then
    redis.call('del', KEYS[3])
  end
  holder_granted(KEYS[4], ARGV[2], ARGV[6], ARGV[1])
  return {1, fence}
end
if ARGV[4] == '1' and (upgrade or not intent or ours(intent)) then
  redis.call('set', KEYS[3], (upgrade and 'upgrade:' or 'write:') .. ARGV[2], 'px', ARGV[3])
end
if mode then
  return {0, redis.call('pttl', KEYS[1])}
end
return {0, redis.call('pttl', KEYS[3])}
