-- Release a simple lock if the caller's token still holds it (compare-and-delete).
-- KEYS[1] lock key        KEYS[2] unlock channel
-- ARGV[1] token           ARGV[2] unlock message     ARGV[3] 'publish', 'spublish' or '' (none)
-- Returns nil if the token does not hold it (nothing changes), else 1 + the number of
-- subscribers the unlock message reached; the server's error if it refuses the read (an ACL).
-- pcall: GET on a key of another type fails, and that too means "not ours"; any other failure
-- (an ACL that forbids GET) goes back to the caller.
local value = redis.pcall('get', KEYS[1])
if value ~= ARGV[1] then
  if type(value) == 'table' and not string.find(value.err, '^WRONGTYPE') then
    return value
  end
  return nil
end
redis.call('del', KEYS[1])
if ARGV[3] == '' then
  return 1
end
return 1 + redis.call(ARGV[3], KEYS[2], ARGV[2])
