// The countdown latch's layout and errors (Redisson's RCountDownLatch), shared by its calls
// (latch.cpp) and its wait (latch_wait.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/error.hpp"
#include "dlock/redis/reply.hpp"
#include "dlock/redis/script.hpp"

namespace dlock::detail {

class lock_core;

/// The latch's channel, as Redisson derives it: always braced, whatever the name holds (braces
/// included).
std::string latch_channel(const std::string& name);

/// latch_down.lua: counts the latch down ('one'), reads its count ('read') or deletes it ('all').
const script& latch_down_script();

/// An error about the latch `name` from a call that failed with `ec`; `text` is the server's
/// reply, or empty. The scripts' verdict "WRONGTYPE holds a list, not a count" reads as "latch
/// 'NAME' holds a list, not a count".
dlock::error latch_error(const std::string& name, std::error_code ec, std::string_view text);

/// The count a 'read' returned (nil: no latch, 0). The script has checked it is an integer.
std::int64_t latch_count(const std::string& name, const reply& r);

/// The latch needs its count and its channel on one node (one script touches both): throws
/// errc::invalid_argument over RedLock, or when they fall in different cluster slots.
void check_latch_topology(lock_core& core, const std::string& name);

}  // namespace dlock::detail
