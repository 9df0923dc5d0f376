-- Fragment: Redisson's rule for a key derived from a name by a suffix (RedissonObject's
-- suffixName): `NAME:suffix` when NAME already holds a '{', else `{NAME}:suffix`, so the derived
-- key lands in the name's cluster slot.
local function suffixed(name, suffix)
  if string.find(name, '{', 1, true) then
    return name .. ':' .. suffix
  end
  return '{' .. name .. '}:' .. suffix
end
