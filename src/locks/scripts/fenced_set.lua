-- Write a value only if the writer's fencing token is not older than the newest one seen for
-- this resource: a paused ex-holder (lower token) cannot overwrite what a later holder wrote.
-- KEYS[1] resource key    KEYS[2] highest token seen for it
-- ARGV[1] fencing token   ARGV[2] value
-- Returns {1, token} when written, {0, highest} when rejected as stale.
local token = tonumber(ARGV[1])
if token == nil then
  return redis.error_reply('ERR fencing token must be an integer')
end
local recorded = redis.call('get', KEYS[2])
local highest = -1
if recorded then
  highest = tonumber(recorded)
  if highest == nil then
    -- Someone else's string under our record's name: refuse rather than guess, write nothing.
    return redis.error_reply('WRONGTYPE the fence record holds a string that is not a token')
  end
end
if token < highest then
  return {0, highest}
end
redis.call('set', KEYS[2], ARGV[1])
redis.call('set', KEYS[1], ARGV[2])
return {1, token}
