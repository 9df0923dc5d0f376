-- Fragment included by lock_info.lua and force_unlock.lua.
-- The state of one lock as {type, pttl, fence, owner1, holds1, owner2, holds2, ...}: type is
-- what TYPE says ('none', 'hash' for a reentrant lock, 'string' for a simple one, or anything
-- else); a simple lock's owner is its token, with 1 hold. Returns the type and the state.
local function snapshot(lock_key, fence_key)
  local kind = redis.call('type', lock_key).ok
  local state = {kind, redis.call('pttl', lock_key), redis.call('get', fence_key) or '0'}
  if kind == 'hash' then
    local fields = redis.call('hgetall', lock_key)
    for i = 1, #fields, 2 do
      state[#state + 1] = fields[i]
      state[#state + 1] = tonumber(fields[i + 1]) or 0
    end
  elseif kind == 'string' then
    state[4] = redis.call('get', lock_key)
    state[5] = 1
  end
  return kind, state
end
