-- Fragment: a count in Redisson's layout (a string holding an integer): a semaphore's free
-- permits, a latch's count. permits_of(key) returns the count (0 if the key does not exist),
-- or nil and an error reply when the key holds something else.
local function permits_of(key)
  local kind = redis.call('type', key).ok
  if kind == 'none' then
    return 0
  end
  if kind ~= 'string' then
    return nil, redis.error_reply('WRONGTYPE holds ' .. (kind == 'hash' and 'a hash' or 'a ' .. kind) ..
      ', not a count')
  end
  local value = redis.call('get', key)
  if not string.match(value, '^%-?%d+$') then
    return nil, redis.error_reply('WRONGTYPE holds a string that is not a permit count')
  end
  return tonumber(value)
end
