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
