-- Fragment, after _guarded_read: ends the script unless the caller holds the lock KEYS[1], by
-- the check a release makes: in the 'string' layout (ARGV[1]) the key holds the caller's token,
-- in 'hash' it has the caller's owner field (ARGV[2]). Ends with {0} when the caller does not
-- hold it, or with the server's error if it refused the read (an ACL).
do
  local held, refused
  if ARGV[1] == 'hash' then
    held, refused = guarded_read('hexists', KEYS[1], ARGV[2])
    held = held == 1
  else
    held, refused = guarded_read('get', KEYS[1])
    held = held == ARGV[2]
  end
  if refused then
    return refused
  end
  if not held then
    return {0}
  end
end
