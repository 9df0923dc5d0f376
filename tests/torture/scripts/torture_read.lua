-- A fenced read: the value, unless a newer lock holder has already touched the resource.
-- KEYS[1] the resource (see _resource.lua)
-- ARGV[1] the reader's fencing token (decimal)
-- Returns {seq, 1, value, highest} when accepted, {seq, 0, '', highest} when rejected as stale.
-- The sequence number is taken either way, so the checker sees every op in the server's order.
--#include _resource
local seq, accepted, highest = fenced_op(KEYS[1], ARGV[1])
if not accepted then
  return {seq, 0, '', highest}
end
return {seq, 1, redis.call('hget', KEYS[1], 'value') or '0', highest}
