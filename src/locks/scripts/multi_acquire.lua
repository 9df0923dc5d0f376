-- Acquire (or re-enter) several reentrant locks in Redisson's RLock layout at once: every name
-- or none. All keys must live in one slot (the caller checks; a cluster refuses otherwise).
-- KEYS[2i-1] lock hash of name i     KEYS[2i] its fencing counter
-- ARGV[1] lease in ms                ARGV[2] owner field "<client-uuid>:<thread-or-owner-id>"
-- Returns {1, s1, f1, s2, f2, ...}  every name is now held by the owner: s = 1 for a new grant
--                                   (f = its counter's next value, see _fence.lua), s = 2 for a
--                                   re-entry (f = the counter's current value, or a new token if
--                                   the counter was lost: held_fence in _fence.lua; the lease is
--                                   only ever extended, as in reentrant_acquire.lua),
--         {0, i, pttl}              name i is held by someone else (pttl -1: no expiry); nothing
--                                   changed,
--         an error "WRONGTYPE name i holds ..., not a lock" when name i holds something that is
--         not a lock; nothing changed.
--#include _fence
--#include _layout
local n = #KEYS / 2
local owner = ARGV[2]

-- All or nothing: every name is judged before anything is written. A name that is not a lock
-- outranks one that is held, since no amount of waiting fixes it.
local reentry = {}
local busy, busy_pttl
for i = 1, n do
  local key = KEYS[2 * i - 1]
  local kind = redis.call('type', key).ok
  if kind == 'none' then
    reentry[i] = false
  elseif kind == 'hash' and redis.call('hexists', key, owner) == 1 then
    reentry[i] = true
  else
    local layout, what, pttl = lock_layout(key, kind)
    if not layout then
      return redis.error_reply('WRONGTYPE name ' .. i .. ' holds ' .. what .. ', not a lock')
    end
    if not busy then
      busy, busy_pttl = i, pttl
    end
  end
end
if busy then
  return {0, busy, busy_pttl}
end

-- Every token is drawn before any lock is written: a script that fails half-way (an ACL that
-- forbids INCR, say) must not leave locks nobody was told about. An unused token is harmless.
local fences = {}
for i = 1, n do
  if reentry[i] then
    fences[i] = held_fence(KEYS[2 * i])
  else
    fences[i] = next_fence(KEYS[2 * i])
  end
end

local out = {1}
for i = 1, n do
  local key = KEYS[2 * i - 1]
  if reentry[i] then
    redis.call('hincrby', key, owner, 1)
    if redis.call('pttl', key) < tonumber(ARGV[1]) then
      redis.call('pexpire', key, ARGV[1])
    end
    out[#out + 1] = 2
    out[#out + 1] = fences[i]
  else
    redis.call('hset', key, owner, 1)
    redis.call('pexpire', key, ARGV[1])
    out[#out + 1] = 1
    out[#out + 1] = fences[i]
  end
end
return out
