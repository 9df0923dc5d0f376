// A multi-lock's one script call (multi_acquire.lua): when every key of every name lives on one
// node in one slot, one call takes every free name or none. The acquisition that uses it, and
// falls back to taking the names one by one, is in multi_lock.cpp.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "locks/runtime/grant.hpp"

namespace dlock::detail {

class lock_core;

/// One reentrant lock handle per name of a multi-lock, without the core (`core` is empty): a
/// pending acquisition must not keep its client open.
using multi_handles = std::vector<std::unique_ptr<lock_handle>>;

/// The handles a reentrant_lock of each name would have: the same kind, keys and fence counter.
multi_handles multi_handles_for(const lock_core& core, const std::vector<std::string>& names);

/// "'a', 'b'": the names, for messages.
std::string names_phrase(const multi_handles& hs);

/// True if one script call can reach every key of every name: one node, one slot. Never for
/// RedLock, whose grants need a majority of masters, which taking the names one by one gives.
bool one_call_reaches(lock_core& core, const multi_handles& hs);

/// How the one call went.
struct one_call_result {
  enum class end {
    granted,  // `holds` has every name
    busy,     // a name is held elsewhere; nothing was taken
    retry,    // nothing is kept (born dead, not replicated, no reply): worth another try
    failed,   // `ec` and `message` say why; waiting cannot fix it
  } what = end::failed;
  std::vector<lease> holds;  // granted: all; retry: re-entries to give back
  std::error_code ec;
  std::string message;
};

/// Sends the one call for `owner`, its reply due by `until`; `done` runs once, on the I/O thread,
/// with the outcome, every grant in it already a registered lease. `hs`, `o` and `owner` must
/// outlive `done` (which may own them). Any thread.
void send_one_call(lock_core& core, const multi_handles& hs, const lease_options& o,
                   const std::string& owner, std::chrono::milliseconds lease_time,
                   steady::time_point until, std::function<void(one_call_result)> done);

}  // namespace dlock::detail
