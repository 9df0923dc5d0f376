-- A writer (or upgrader) that stopped waiting withdraws its intent, letting readers in again.
-- KEYS[1] the lock's hash (not read: it comes first so that this call takes the lock's
--         connection, behind the writer's own attempts)
-- KEYS[2] writers' intent key     KEYS[3] channel
-- ARGV[1] writer field            ARGV[2] message ('1')     ARGV[3] 'publish' or 'spublish'
-- Returns 1 if the intent was ours and is gone, 0 otherwise.
--#include _notify
local intent = redis.call('get', KEYS[2])
if intent ~= 'write:' .. ARGV[1] and intent ~= 'upgrade:' .. ARGV[1] then
  return 0
end
redis.call('del', KEYS[2])
notify(ARGV[3], KEYS[3], ARGV[2])
return 1
