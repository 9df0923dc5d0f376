-- Fragment: tells the subscribers of `channel` with `command` (PUBLISH, SPUBLISH, or '' for
-- nobody). A message only wakes waiters, who re-check the lock at least every max_recheck
-- anyway; it is never part of the state. So a refusal (an ACL user without PUBLISH) does not
-- fail the script after its writes, which a client would then take for a change that never
-- happened. Returns how many subscribers were told (0 if refused).
local function notify(command, channel, message)
  if command == '' then
    return 0
  end
  local told = redis.pcall(command, channel, message)
  return type(told) == 'number' and told or 0
end
