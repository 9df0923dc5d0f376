-- Fragment: a count in Redisson's layout, a string holding an integer: a semaphore's free
-- permits, a latch's count. count_of(key) returns the count (0 if the key does not exist), or nil
-- and an error reply when the key holds something else: a count is what INCRBY and DECR accept,
-- a 64-bit integer without '+', leading zeros or blanks. Checked before any change, so that a
-- refused key is left as it was.
local function count_of(key)
  local kind = redis.call('type', key).ok
  if kind == 'none' then
    return 0
  end
  if kind ~= 'string' then
    return nil, redis.error_reply('WRONGTYPE holds a ' .. kind .. ', not a count')
  end
  local value = redis.call('get', key)
  local digits = string.match(value, '^%-?([1-9]%d*)$')
  local most = string.sub(value, 1, 1) == '-' and '9223372036854775808' or '9223372036854775807'
  if value ~= '0' and not (digits and (#digits < 19 or (#digits == 19 and digits <= most))) then
    return nil, redis.error_reply('WRONGTYPE holds a string that is not a count')
  end
  return tonumber(value)
end
