-- Fragment: a fair lock's queue of waiters (Redisson's RFairLock layout): the list KEYS[2] holds
-- owner ids in arrival order, the sorted set KEYS[3] each one's deadline (epoch ms). dlock reads
-- the clock from the server (TIME), never from a client, and a dlock waiter keeps its deadline a
-- waiter lease ahead while it waits, so a waiter that died lapses within that lease.
-- Needs _clock.
-- Removes waiters from the front whose place lapsed (or has no deadline at all), so a dead
-- waiter never stands between the lock and the living.
local function drop_lapsed_waiters(queue, deadlines, now)
  while true do
    local first = redis.call('lindex', queue, 0)
    if not first then
      return
    end
    local deadline = tonumber(redis.call('zscore', deadlines, first))
    if deadline and deadline > now then
      return
    end
    redis.call('lpop', queue)
    redis.call('zrem', deadlines, first)
  end
end

-- A queue or deadline key of another type would stop a script half-way, after its first writes;
-- the scripts check first. Returns a WRONGTYPE error reply, or nil when both are usable.
local function queue_fault(queue, deadlines)
  local kind = redis.call('type', queue).ok
  if kind ~= 'none' and kind ~= 'list' then
    return redis.error_reply('WRONGTYPE its waiter queue holds a ' .. kind .. ', not a list')
  end
  kind = redis.call('type', deadlines).ok
  if kind ~= 'none' and kind ~= 'zset' then
    return redis.error_reply("WRONGTYPE its waiters' deadlines hold a " .. kind ..
                             ', not a sorted set')
  end
  return nil
end

-- Tells the first living waiter, on its own channel (`channel` .. ':' .. its owner id), that the
-- lock is free; with `command` '' nobody is told. Needs _notify (the scripts that wake include it).
local function wake_first_waiter(queue, deadlines, command, channel, message)
  drop_lapsed_waiters(queue, deadlines, server_now_ms())
  local first = redis.call('lindex', queue, 0)
  if first then
    notify(command, channel .. ':' .. first, message)
  end
end
