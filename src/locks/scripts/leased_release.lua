-- Give back leased permits by their ids: only permits still held within their lease under those
-- ids come back. An id that is not held (released already, forged) or whose lease ran out
-- changes nothing: an expired permit is the next acquisition's to reclaim.
-- KEYS[1] free-permit count     KEYS[2] permits taken      KEYS[3] channel
-- KEYS[4] holder identities (_holder.lua)
-- ARGV[1] ids, 16 bytes each, concatenated     ARGV[2] 'publish', 'spublish' or ''
-- Returns nil if none of the ids was held within its lease, else 1 + the subscribers told.
--#include _notify
--#include _clock
--#include _holder
local now = server_now_ms()
local returned = 0
for i = 1, #ARGV[1], 16 do
  local id = string.sub(ARGV[1], i, i + 15)
  local expiry = redis.call('zscore', KEYS[2], id)
  if expiry and tonumber(expiry) > now then
    redis.call('zrem', KEYS[2], id)
    holder_ended(KEYS[4], id)
    returned = returned + 1
  end
end
if returned == 0 then
  return nil
end
local free = redis.call('incrby', KEYS[1], returned)
if ARGV[2] == '' then
  return 1
end
return 1 + notify(ARGV[2], KEYS[3], free)
