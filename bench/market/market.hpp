// The Redis in Action §6.2 marketplace benchmark (docs/market.md), as a library: the
// book's WATCH, lock and fine-grained-lock algorithms re-implemented, dlock's locks on the same
// work, the same work with no lock at all (unsafe: what locking costs), and a Lua-script ceiling,
// each run on a freshly flushed database at the book's three loads. `dlock market` and
// `dlock_market_probe` call it; nothing here prints or parses arguments.
//
// Data, as in the book: `market:` (ZSET, member "<itemid>.<sellerid>", score = price),
// `users:<id>` (HASH: name, funds), `inventory:<id>` (SET of item ids). Every run starts with
// FLUSHALL, so it must own its server: an embedded one by default, or a --url the caller has
// explicitly allowed us to flush.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dlock/client.hpp"

#include <nlohmann/json.hpp>

namespace dlock::market {

/// One load level: how many lister threads and buyer threads run at once.
struct load {
  int listers = 1;
  int buyers = 1;
};

/// How the `dlock-coarse` and `dlock-fine` variants use dlock. The defaults are the choices the
/// report documents; the others exist to measure that choice (see market.cpp's header).
struct dlock_settings {
  /// One dlock::client shared by every worker (its locks pipelined on one connection, waiters of
  /// one name queued locally), instead of one client per worker (like separate processes).
  bool shared_client = true;
  /// With a client per worker: run the work on that client's connection too (one connection
  /// per worker, as in the book variants) instead of on a second one. The work's MULTI is safe
  /// there only while the client sends nothing of its own (no watchdog, no lost replies).
  bool work_on_lock_connection = false;
  /// The simple lock (SET NX PX layout) instead of the reentrant one (Redisson hash layout).
  bool simple = true;
  /// A fixed lease of `lease_ms` instead of a watchdog lease.
  bool fixed_lease = true;
  int lease_ms = 10'000;
  /// Try once without waiting before the event-driven wait. dlock subscribes only once a waiter
  /// finds the lock held, so this buys nothing; it only makes the harness able to tell
  /// contended acquisitions apart (reported as lock_timing.waits).
  bool try_first = false;
  /// The work's first read (a lister's SISMEMBER, a buyer's ZSCORE + HGET) travels with the
  /// acquisition (`try_acquire_and_read`): one round trip for both when the lock is free,
  /// instead of acquiring and then reading on the worker's own connection. The same commands,
  /// as atomic together as the book's MULTI makes them.
  bool reads_with_acquisition = true;
  /// The work's writes (a lister's ZADD + SREM, a buyer's HINCRBY x2, SADD, ZREM) run in the
  /// lease's `write_and_release`: one script checks the hold and writes, and the release follows
  /// in the same send (one round trip for both, on the lock's connection). Otherwise the writes
  /// are MULTI ... EXEC on the worker's own connection and the release is sent after them.
  bool writes_with_release = true;
  /// client_options::busy_poll_under_load of the dlock clients.
  dlock::load_polling busy_poll_under_load = dlock::load_polling::when_it_pays;
  /// client_options::busy_poll of the dlock clients; unset: the library's default.
  std::optional<std::chrono::microseconds> busy_poll;
  /// client_options::fence_counter of the dlock clients: every lock's tokens from this one
  /// counter instead of a counter per item; empty: the library's default (a counter per name).
  std::string fence_counter;
};

struct options {
  /// The server. Empty: start a private redis-server for this call (stopped before `run`
  /// returns).
  std::string url;
  /// Every run begins with FLUSHALL. A server given by `url` is only used if this is set.
  bool allow_flush = false;
  /// Length of each run.
  double seconds = 60;
  /// Which variants, in order; empty means all of `all_variants()`.
  std::vector<std::string> variants;
  std::vector<load> loads = {{1, 1}, {5, 1}, {5, 5}};
  /// Receives one line per run (and per phase of setting it up). May be empty.
  std::function<void(const std::string&)> progress;
  dlock_settings dlock;
};

/// watch, book-lock, book-fine, dlock-coarse, dlock-fine, no-lock, script.
const std::vector<std::string>& all_variants();

/// One run: one variant at one load.
struct row {
  std::string variant;
  int listers = 0;
  int buyers = 0;
  double seconds = 0;          ///< measured: start signal to the last worker stopping
  std::uint64_t listed = 0;    ///< items put on the market
  std::uint64_t bought = 0;    ///< items bought
  std::uint64_t retries = 0;   ///< failed EXECs inside purchase calls (never lock polling)
  std::uint64_t stale = 0;     ///< purchases of an item gone (or repriced) when we got to it
  std::uint64_t timeouts = 0;  ///< list or purchase calls that reached the book's time limit
  double wait_ms_a = 0;        ///< mean wall time of a successful purchase call
  double wait_ms_b = 0;        ///< all buyer time inside purchase calls / bought
  double p50_ms = 0;           ///< purchase call latency, successful calls only
  double p99_ms = 0;
  /// listed + bought per second.
  double per_second() const {
    return seconds > 0 ? static_cast<double>(listed + bought) / seconds : 0;
  }
};

struct report {
  std::vector<row> rows;
  /// The choices docs/market.md says the book leaves open, with the values used, plus how the
  /// variants were built (connections, lock kinds, what the fine locks lock).
  nlohmann::json choices;
};

/// Runs every load × variant. Throws `dlock::error` (server unreachable, a command failed),
/// `std::invalid_argument` (bad options, or a --url without `allow_flush`) or
/// `std::runtime_error` (no redis-server to embed).
report run(const options& o);

/// Our rows; per load, dlock-fine's listed+bought/s over book-fine's and over no-lock's; the same
/// rows beside the book's Table 6.3 (same load, matching book variant: watch ↔ "no lock",
/// book-lock and dlock-coarse ↔ "with lock", book-fine and dlock-fine ↔ "fine-grained lock");
/// what the audits found (no-lock's apart: unsafe by design, never a failure), and notes on which
/// columns compare.
std::string render_table(const report& r);

/// {"rows":[{"variant","listers","buyers","seconds","listed","bought","retries","stale",
/// "timeouts","wait_ms_a","wait_ms_b","p50_ms","p99_ms"}…],
///  "ratios":[{"listers","buyers","dlock_fine_per_s","book_fine_per_s","no_lock_per_s",
///  "dlock_fine_over_book_fine","dlock_fine_over_no_lock"}…] (one per load; null where a variant
///  did not run), "choices":{…}}
nlohmann::json to_json(const report& r);

}  // namespace dlock::market
