-- Undo a semaphore acquisition whose outcome is unknown (its reply was lost, or came too late):
-- give its permits back only if it took them, and make sure it takes none if it runs later.
-- KEYS[1] free-permit count     KEYS[2] channel     KEYS[3] the attempt's grant mark
-- KEYS[4] holder identities (_holder.lua)              ARGV[4] the grant's id
-- ARGV[1] permits               ARGV[2] 'publish', 'spublish' or '' (nobody told)
-- ARGV[3] how long the mark lasts (ms): longer than the attempt could still be on its way
-- Returns 1 + the subscribers told if permits went back, 0 if the attempt had taken none.
--#include _notify
--#include _holder
local mark = redis.call('get', KEYS[3])
redis.call('set', KEYS[3], 'void', 'px', ARGV[3])
if mark ~= 'taken' then
  return 0
end
holder_ended(KEYS[4], ARGV[4])
redis.call('incrby', KEYS[1], ARGV[1])
if ARGV[2] == '' then
  return 1
end
return 1 + notify(ARGV[2], KEYS[2], redis.call('get', KEYS[1]))
