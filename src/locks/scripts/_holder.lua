-- Fragment: who holds a lock, kept beside it so that an operator can ask (docs/operating.md).
-- The key `dlock_holder:{NAME}` (the lock's slot) is a hash: each hold's owner field (a
-- semaphore's permit id or grant mark) -> the JSON object its client sent, {"host":...}, with the
-- server's clock at the grant put first as "since_ms". The scripts that grant, renew and release
-- a hold keep its entry and the key's expiry in step with the hold: the key never outlives the
-- longest hold it names, and goes with the last entry. Redisson's keys are never touched.
-- Every write is best effort (pcall): a key of that name holding someone's data costs the operator
-- the record, never the lock. A client that records nothing (client_options::record_holder off,
-- e.g. for an ACL user whose key patterns leave out dlock_holder:*) sends no such key: `key` is
-- nil then, and each function does nothing.

-- Pushes the key's expiry out to `lease_ms` from now, never pulling it in: a read lock's or a
-- semaphore's entries belong to holds with leases of their own, the longest of which it must
-- cover. Nothing happens to a key that is not there.
local function holder_extend(key, lease_ms)
  if not key then
    return
  end
  local pttl = redis.pcall('pttl', key)
  if type(pttl) == 'number' and pttl ~= -2 and pttl < tonumber(lease_ms) then
    redis.pcall('pexpire', key, lease_ms)
  end
end

-- Records `identity` as `field`'s at a new grant.
local function holder_granted(key, field, identity, lease_ms)
  if not key or identity == nil or identity == '' then
    return
  end
  local now = redis.pcall('time')
  if type(now) ~= 'table' or now.err then
    return  -- an ACL without TIME: the grant stands, unrecorded
  end
  local since = now[1] .. string.format('%03d', math.floor(tonumber(now[2]) / 1000))
  redis.pcall('hset', key, field, '{"since_ms":' .. since .. ',' .. string.sub(identity, 2))
  holder_extend(key, lease_ms)
end

-- Forgets `field` once its hold has ended.
local function holder_ended(key, field)
  if key then
    redis.pcall('hdel', key, field)
  end
end
