-- Fragment: the next fencing token from the counter at `key`.
-- A counter that does not exist yet (never used, or lost to a server restart without persistence
-- or to a flush) starts from the server's clock in microseconds rather than from 0, so tokens
-- keep going up across such a loss as long as the counter handed out fewer than a million tokens
-- per second on average and the server's clock never stepped back (docs/safety.md).
-- The counter is INCRed first, as Redisson's fenced lock does with the same key, so a grant costs
-- one command. A result below 10^15 (2001 in microseconds) was never started from a clock: the
-- counter was absent, started at 1 by Redisson, or left small by a script that failed after its
-- INCR (an ACL that forbids TIME or SET). It restarts from the clock, which only raises it.
local clock_era = 1e15

local function next_fence(key)
  local fence = redis.call('incr', key)
  if fence < clock_era then
    -- Never lowers it, even on a server whose clock reads a time before 2001.
    local now = redis.call('time')
    local clock = now[1] .. string.format('%06d', tonumber(now[2]))
    if tonumber(clock) > fence then
      redis.call('set', key, clock)
      fence = redis.call('incr', key)
    end
  end
  return fence
end

-- The token a re-entry (or a retried grant finding its own hold) reports: the counter as it
-- stands (for a mutex, the hold's own token: no other grant of it comes while the hold lasts;
-- for a read hold, the newest reader's). A counter that fell below the clock's era while the
-- lock was held (deleted by hand, evicted under an allkeys-* maxmemory policy) would report a
-- token lower than the hold's own; it is raised from the clock as a new grant's would be, and
-- the caller hears that token, never a lower one. Called before the script writes anything, as
-- next_fence is: an error here (a counter of another type, an ACL) must not leave a count
-- nobody was told about.
local function held_fence(key)
  local fence = tonumber(redis.call('get', key) or '0') or 0
  if fence < clock_era then
    return next_fence(key)
  end
  return fence
end
