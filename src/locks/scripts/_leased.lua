-- Fragment: leased permits. taken_fault(key) is an error reply if the permits-taken set holds
-- something else (checked before any change), else nil. reclaim_expired: leased permits whose
-- expiry passed go back to the free count, their holders' identities go (needs _holder), and
-- waiters hear of it (needs _notify); it returns the free count after that.
local function taken_fault(taken_key)
  local kind = redis.call('type', taken_key).ok
  if kind ~= 'none' and kind ~= 'zset' then
    return redis.error_reply('WRONGTYPE its permits-taken set holds a ' .. kind ..
                             ', not a sorted set')
  end
  return nil
end

local function reclaim_expired(count_key, taken_key, holder_key, channel, publish, now, free)
  local expired = redis.call('zrangebyscore', taken_key, '-inf', now)
  if #expired == 0 then
    return free
  end
  for _, id in ipairs(expired) do
    redis.call('zrem', taken_key, id)
    holder_ended(holder_key, id)
  end
  free = redis.call('incrby', count_key, #expired)
  if publish ~= '' then
    notify(publish, channel, free)
  end
  return free
end
