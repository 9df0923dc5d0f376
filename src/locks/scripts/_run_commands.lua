-- Fragment: runs the caller's commands, given in ARGV from `first` on as each one's argument
-- count followed by its arguments, in order. Returns their replies; a command the server
-- refuses gives its error in its place and the others still run.
local function run_commands(first)
  local replies = {}
  local i = first
  while i <= #ARGV do
    local count = tonumber(ARGV[i])
    replies[#replies + 1] = redis.pcall(unpack(ARGV, i + 1, i + count))
    i = i + count + 1
  end
  return replies
end
