// What a lock name holds, seen from outside (lock_view.cpp): shared by `status`, `ls` and
// `unlock --force`.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/lock.hpp"
#include "dlock/semaphore.hpp"

namespace dlock::cli {

/// What a name holds, as `status` and `ls` show it: the lock snapshot, and what the other kinds
/// add to it.
struct shown {
  lock_info info;
  std::string kind;                       ///< the JSON kind (docs/cli.md)
  std::string mode;                       ///< read-write: "read" or "write"
  std::optional<semaphore_info> permits;  ///< leased semaphore
  std::optional<std::int64_t> count;      ///< semaphore or latch: the integer the name holds
};

/// "free", "reentrant", "simple", "other", "read-write", "fair".
const char* kind_name(lock_type t);
/// "-" (none), "no expiry", or seconds with one decimal.
std::string ttl_text(const std::optional<std::chrono::milliseconds>& ttl);
/// Recognises what `name` holds from its keys (docs/cli.md). Throws dlock::error.
shown inspect(const dlock::client& c, const std::string& name);
/// Whether someone holds it (a leased semaphore: a permit is leased).
bool locked(const shown& s);
/// Whether `ls` shows it without `--all`: not a free name (nothing but its fence counter, or a
/// leased semaphore with no permit out). A bare count is shown: it is a latch not at zero or a
/// semaphore, whose permits in use its count alone cannot tell.
bool in_use(const shown& s);
/// A holder record for people: "USER@HOST pid PID, for 3m12s: LABEL".
std::string identity_text(const holder_identity& id);
/// A holder record as JSON (docs/cli.md): host, pid, user, label, client_id, since (ISO 8601,
/// UTC) and since_ms.
nlohmann::json identity_json(const holder_identity& id);
/// The kind column; a key that is not a lock says what it holds instead.
std::string kind_text(const shown& s);
/// The documented JSON form of one name (docs/cli.md).
nlohmann::json to_json(const std::string& name, const shown& s);
/// "OWNER (N holds), ..." or "-".
std::string holders_text(const lock_info& info);
/// A fair lock's queue: "OWNER, ..." or "-".
std::string queue_text(const lock_info& info);
/// A leased semaphore's permits: "2 free, 1 leased: ID (ttl 29.0s)".
std::string permits_text(const semaphore_info& p);
/// The HOLDERS column of `ls`: holders, and what the kind adds.
std::string details_text(const shown& s);
/// Connects, turning a connection error into a `failure` with its exit code.
dlock::client connect_to(const client_options& target);
/// Lock names as their users wrote them, from the fencing counters on `node` (SCAN, never
/// KEYS), one of `c`'s masters.
std::vector<std::string> scan_lock_names(const dlock::client& c, redis_client& node);

}  // namespace dlock::cli
