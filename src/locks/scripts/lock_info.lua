-- A consistent snapshot of one lock, for status tools.
-- KEYS[1] lock key        KEYS[2] fencing counter     KEYS[3] the name's fair queue (list)
-- KEYS[4] holder identities (_holder.lua)
-- Returns the state described in _snapshot.lua.
--#include _layout
--#include _snapshot
local _, _, state = snapshot(KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return state
