-- Extend many leased permits in one call (the watchdog's batch for one node and slot), each
-- only while every permit of the hold is still taken.
-- KEYS[2i-1]   semaphore name of hold i (its `{NAME}:timeout` set is derived from it)
-- KEYS[2i]     its holder identities (_holder.lua), if the client records them; else
--              KEYS[i] is hold i's lock
-- ARGV[2i-1]   the hold's permit ids, 16 bytes each      ARGV[2i]   new lease in ms
-- Returns an array with 1 (extended) or 0 (no longer held) per hold.
--#include _keys
--#include _clock
--#include _holder
local now = server_now_ms()
local result = {}
-- A client that records no holders sends no record keys (_holder.lua).
local stride = #KEYS == #ARGV and 2 or 1
for i = 1, #ARGV / 2 do
  local taken = suffixed(KEYS[stride * i - stride + 1], 'timeout')
  local ids, held = ARGV[2 * i - 1], true
  for at = 1, #ids, 16 do
    local expiry = redis.call('zscore', taken, string.sub(ids, at, at + 15))
    if not expiry or tonumber(expiry) <= now then
      held = false
    end
  end
  if held then
    local expiry = now + tonumber(ARGV[2 * i])
    for at = 1, #ids, 16 do
      redis.call('zadd', taken, 'xx', expiry, string.sub(ids, at, at + 15))
    end
    holder_extend((stride == 2 and KEYS[2 * i] or nil), ARGV[2 * i])
  end
  result[i] = held and 1 or 0
end
return result
