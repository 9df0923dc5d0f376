-- Fragment: leased permits whose expiry passed go back to the free count, and waiters hear of
-- it (needs _notify). Returns the free count after that.
local function reclaim_expired(count_key, taken_key, channel, publish, now, free)
  local expired = redis.call('zrangebyscore', taken_key, '-inf', now)
  if #expired == 0 then
    return free
  end
  for _, id in ipairs(expired) do
    redis.call('zrem', taken_key, id)
  end
  free = redis.call('incrby', count_key, #expired)
  if publish ~= '' then
    notify(publish, channel, free)
  end
  return free
end
