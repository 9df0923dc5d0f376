-- Fragment: a release's read of the lock. A key of another type is not the caller's lock (the
-- command fails with WRONGTYPE: read as nil); any other failure, such as an ACL that forbids the
-- command, is returned second, for the script to hand back to the caller.
local function guarded_read(...)
  local value = redis.pcall(...)
  if type(value) == 'table' and value.err then
    if string.find(value.err, '^WRONGTYPE') then
      return nil
    end
    return nil, value
  end
  return value
end
