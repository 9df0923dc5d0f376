-- Fragment: the next fencing token from the counter at `key`.
-- Every token is at least the server's clock in microseconds (TIME) at its grant: the counter is
-- INCRed, as Redisson's fenced lock does with the same key, and raised to the clock when the
-- clock is ahead (it nearly always is: grants on one name come far less often than once a
-- microsecond). So tokens keep going up across the loss of a counter (a restart without
-- persistence, a flush) and across a failover to a replica that missed the last grants, as
-- long as the new server's clock is ahead of the old one's at those grants, i.e. the failover
-- took longer than the two clocks' skew, and no clock stepped back (docs/safety.md).
local clock_era = 1e15

-- The error a script raises when reading or counting the counter failed with `refusal`: when the
-- key holds something INCR cannot count, a typed WRONGTYPE naming it (the client reports
-- errc::wrong_type), never the server's bare "value is not an integer"; otherwise (an ACL's
-- refusal, say) `refusal` itself.
local function counter_fault(key, refusal)
  local kind = redis.call('type', key).ok
  if kind == 'string' then
    if string.match(redis.call('get', key), '^%-?%d+$') then
      return refusal
    end
    return {err = 'WRONGTYPE its fencing counter holds a string that is not a count'}
  elseif kind ~= 'none' then
    return {err = 'WRONGTYPE its fencing counter holds a ' .. kind .. ', not a count'}
  end
  return refusal
end

local function next_fence(key)
  local fence = redis.pcall('incr', key)
  if type(fence) ~= 'number' then
    error(counter_fault(key, fence))
  end
  -- Never lowers it. The clock is written as digits: a Lua number would reach the server
  -- rounded to 14 significant digits.
  local now = redis.call('time')
  local clock = now[1] .. string.format('%06d', tonumber(now[2]))
  if tonumber(clock) > fence then
    redis.call('set', key, clock)
    fence = tonumber(clock)
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
  local value = redis.pcall('get', key)
  if type(value) == 'table' then
    error(counter_fault(key, value))
  end
  local fence = tonumber(value or '0') or 0
  if fence < clock_era then
    return next_fence(key)
  end
  return fence
end
