-- A fenced read-modify-write's write: stores the value the writer read plus one, unless a newer
-- lock holder has already touched the resource.
-- KEYS[1] the resource (see _resource.lua)
-- ARGV[1] the writer's fencing token (decimal)    ARGV[2] the value the writer read
-- Returns {seq, 1, replaced, highest} when written (`replaced` is the value overwritten: if it
-- is not ARGV[2], an update was lost), {seq, 0, '', highest} when rejected as stale.
--#include _resource
local seq, accepted, highest = fenced_op(KEYS[1], ARGV[1])
if not accepted then
  return {seq, 0, '', highest}
end
local replaced = redis.call('hget', KEYS[1], 'value') or '0'
redis.call('hset', KEYS[1], 'value', tostring(tonumber(ARGV[2]) + 1))
return {seq, 1, replaced, highest}
