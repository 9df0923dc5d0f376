-- Fragment included by lock_info.lua and force_unlock.lua (after _layout.lua).
-- The state of one lock as {type, layout, pttl, fence, mode, queued, owner1, holds1, identity1,
-- ...}:
-- type is what TYPE says; layout is 'lock' or 'lock_no_ttl' for a key in a lock's layout, 'none'
-- for no key, otherwise what the key holds instead ('a list', ...); mode is a read-write lock's
-- 'mode' field ('' for any other key); queued is 1 if the fair lock's waiter queue `queue_key`
-- exists, else 0 (the two tell the kinds that share a layout apart); owners are listed for
-- locks only (a simple lock's owner is its token, with 1 hold), each with what `holder_key`
-- records of it (_holder.lua), '' if nothing. Returns the type, the layout verdict (nil for a
-- key that is not a lock) and the state.
local function holder_of(holder_key, owner)
  if not holder_key then
    return ''
  end
  local identity = redis.pcall('hget', holder_key, owner)
  return type(identity) == 'string' and identity or ''
end

local function snapshot(lock_key, fence_key, queue_key, holder_key)
  local kind = redis.call('type', lock_key).ok
  local fence = redis.call('get', fence_key) or '0'
  local queued = redis.call('exists', queue_key)
  if kind == 'none' then
    return kind, 'none', {kind, 'none', -2, fence, '', queued}
  end
  local layout, what = lock_layout(lock_key, kind)
  local state = {kind, layout or what, redis.call('pttl', lock_key), fence, '', queued}
  if layout and kind == 'hash' then
    local fields = redis.call('hgetall', lock_key)
    for i = 1, #fields, 2 do
      if fields[i] == 'mode' then
        state[5] = fields[i + 1]
      else
        state[#state + 1] = fields[i]
        state[#state + 1] = tonumber(fields[i + 1])
        state[#state + 1] = holder_of(holder_key, fields[i])
      end
    end
  elseif layout then
    local token = redis.call('get', lock_key)
    state[#state + 1] = token
    state[#state + 1] = 1
    state[#state + 1] = holder_of(holder_key, token)
  end
  return kind, layout, state
end
