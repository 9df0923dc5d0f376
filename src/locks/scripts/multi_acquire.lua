-- Acquire (or re-enter) several reentrant locks in Redisson's RLock layout at once: every name
-- or none. All keys must live in one slot (the caller checks; a cluster refuses otherwise).
-- KEYS[3i-2] lock hash of name i     KEYS[3i-1] its fencing counter
-- KEYS[3i]   its holder identities (_holder.lua), if the client records them (else two keys
--            per name)
-- ARGV[1] lease in ms                ARGV[2] owner field "<client-uuid>:<thread-or-owner-id>"
-- ARGV[3] the holder's identity ('': none)
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
--#include _holder
-- A client that records no holders sends no record keys (_holder.lua), and an empty identity.
local stride = (ARGV[3] or '') == '' and 2 or 3
local n = #KEYS / stride
local owner = ARGV[2]

-- All or nothing: every name is judged before anything is written. A name that is not a lock
-- outranks one that is held, since no amount of waiting fixes it.
local reentry = {}
local busy, busy_pttl
for i = 1, n do
  local key = KEYS[stride * i - stride + 1]
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
    fences[i] = held_fence(KEYS[stride * i - stride + 2])
  else
    fences[i] = next_fence(KEYS[stride * i - stride + 2])
  end
end

local out = {1}
for i = 1, n do
  local key = KEYS[stride * i - stride + 1]
  if reentry[i] then
    redis.call('hincrby', key, owner, 1)
    if redis.call('pttl', key) < tonumber(ARGV[1]) then
      redis.call('pexpire', key, ARGV[1])
      holder_extend(stride == 3 and KEYS[3 * i] or nil, ARGV[1])
    end
    out[#out + 1] = 2
    out[#out + 1] = fences[i]
  else
    redis.call('hset', key, owner, 1)
    redis.call('pexpire', key, ARGV[1])
    holder_granted(stride == 3 and KEYS[3 * i] or nil, owner, ARGV[3], ARGV[1])
    out[#out + 1] = 1
    out[#out + 1] = fences[i]
  end
end
return out
