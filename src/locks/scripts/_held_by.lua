-- Fragment, after _guarded_read: whether the caller holds the lock, by the check a release makes
-- (the key holds the caller's token in the 'string' layout, has its owner field in 'hash').
-- Returns true or false, and second the server's error if it refused the read (an ACL).
local function held_by(layout, key, owner)
  if layout == 'hash' then
    local found, refused = guarded_read('hexists', key, owner)
    return found == 1, refused
  end
  local value, refused = guarded_read('get', key)
  return value == owner, refused
end
