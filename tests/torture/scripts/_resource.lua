-- Fragment: the bookkeeping every op on a torture resource shares. A resource is one hash:
--   value    the integer the workers increment under the lock
--   highest  the highest fencing token an accepted op has carried
--   seq      how many ops (accepted or not) the resource has seen: the ops' total order
-- Fences are compared as decimal strings, not Lua numbers, so tokens beyond 2^53 (dlock's
-- clock-based counters are near 2^51 today) still compare exactly.
local function fence_less(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end

-- Numbers the op, then rejects it if its fence is older than the highest seen, else records the
-- fence as the highest. Returns the op's sequence number, whether it was accepted, and the
-- highest fence as it stands after the op.
local function fenced_op(key, fence)
  local seq = redis.call('hincrby', key, 'seq', 1)
  local highest = redis.call('hget', key, 'highest')
  if highest and fence_less(fence, highest) then
    return seq, false, highest
  end
  redis.call('hset', key, 'highest', fence)
  return seq, true, fence
end
