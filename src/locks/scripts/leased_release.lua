-- Give back leased permits by their ids: only permits still held under those ids come back; an
-- id that is not held (released already, expired, forged) changes nothing.
-- KEYS[1] free-permit count     KEYS[2] permits taken      KEYS[3] channel
-- ARGV[1] ids, 16 bytes each, concatenated     ARGV[2] 'publish', 'spublish' or ''
-- Returns nil if none of the ids was held, else 1 + the subscribers told.
local returned = 0
for i = 1, #ARGV[1], 16 do
  returned = returned + redis.call('zrem', KEYS[2], string.sub(ARGV[1], i, i + 15))
end
if returned == 0 then
  return nil
end
local free = redis.call('incrby', KEYS[1], returned)
if ARGV[2] == '' then
  return 1
end
return 1 + redis.call(ARGV[2], KEYS[3], free)
