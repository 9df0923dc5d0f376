-- Fragment: whether a key is a lock, judged by the layouts lock kinds use, so that a name that
-- holds someone's data is neither waited on as if it were held nor deleted as a lock.
-- lock_layout(key, kind, value), `kind` being the key's TYPE and `value` (optional) a string
-- key's value if the caller read it already, returns
--   'lock', nil, pttl         a lock's layout with an expiry (every lock dlock, Redisson and the
--                             SET NX libraries take has one), and the key's PTTL,
--   'lock_no_ttl', nil, -1    a lock's layout without an expiry: a lock someone left without a
--                             TTL, or data that happens to look like one,
--   nil, what                 not a lock; `what` says what the key holds instead, e.g. 'a list'.
-- (The value and the PTTL are handed over so that a busy attempt reads neither twice.)
-- The layouts: a hash whose fields are owner ids ('<id>:<thread>') holding positive hold counts,
-- plus the 'mode' field of Redisson's read-write lock; a string holding a token: 1 to 128
-- characters among letters, digits and + / = _ : . @ - (random hex, base64, UUIDs, host:pid).
-- Whether a hash field and its value are a hold: an owner id ('<id>:<thread>', a writer's with
-- ':write' after it) and a positive count.
local function is_hold(field, value)
  return string.find(field, ':', 1, true) ~= nil and string.match(value, '^[1-9]%d*$') ~= nil
end

local function lock_layout(key, kind, value)
  if kind == 'hash' then
    if redis.call('hlen', key) > 64 then
      return nil, 'a hash that is not a lock'
    end
    local fields = redis.call('hgetall', key)
    for i = 1, #fields, 2 do
      local field, value = fields[i], fields[i + 1]
      if field == 'mode' then
        if value ~= 'read' and value ~= 'write' then
          return nil, 'a hash that is not a lock'
        end
      elseif not is_hold(field, value) then
        return nil, 'a hash that is not a lock'
      end
    end
  elseif kind == 'string' then
    value = value or redis.call('get', key)
    if #value == 0 or #value > 128 or not string.match(value, '^[%w%+/=_:%.@%-]+$') then
      return nil, 'a string that is not a lock'
    end
    -- A fencing counter someone gave an expiry looks like a lock holding a number; its name
    -- (dlock/keys.hpp, fence_counter_prefix) tells it apart.
    local counter_prefix = 'redisson_lock_token:'
    if string.sub(key, 1, #counter_prefix) == counter_prefix and string.match(value, '^%d+$') then
      return nil, 'a counter'
    end
  else
    local phrases = {list = 'a list', set = 'a set', zset = 'a sorted set', stream = 'a stream'}
    return nil, phrases[kind] or ('a ' .. kind)
  end
  local pttl = redis.call('pttl', key)
  if pttl < 0 then
    return 'lock_no_ttl', nil, pttl
  end
  return 'lock', nil, pttl
end

-- The error a script returns when a lock name holds something else. The client turns it into
-- errc::wrong_type and names the lock; the key name is not repeated here (it may hold bytes an
-- error reply cannot carry).
local function not_a_lock(what)
  if string.find(what, 'not a lock', 1, true) then
    return redis.error_reply('WRONGTYPE holds ' .. what)  -- 'a hash that is not a lock'
  end
  return redis.error_reply('WRONGTYPE holds ' .. what .. ', not a lock')
end

-- Whether a hash is a read-write lock (Redisson's RReadWriteLock layout): its 'mode' is 'read'
-- or 'write' and every other field is a hold. A user's hash that happens to have a 'mode' field
-- is not one, and is neither joined nor deleted at release. A lock read by many owners has a
-- field per owner: one HSCAN batch is checked, so the cost stays bounded (every field of a hash
-- that small, the first hundred or so of a larger one).
local function is_read_write_lock(key)
  local mode = redis.call('hget', key, 'mode')
  if mode ~= 'read' and mode ~= 'write' then
    return false
  end
  local fields = redis.call('hscan', key, '0', 'count', '100')[2]
  for i = 1, #fields, 2 do
    if fields[i] ~= 'mode' and not is_hold(fields[i], fields[i + 1]) then
      return false
    end
  end
  return true
end
