// The dlock command line: shared pieces of the subcommands.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/lock.hpp"

namespace CLI {
class App;
}

namespace dlock::cli {

/// Exit codes (sysexits.h where one fits). Documented in `dlock --help` and docs/cli.md.
enum exit_code : int {
  exit_ok = 0,
  exit_usage = 64,        // EX_USAGE: unknown flag, bad duration, bad URL, missing "--"
  exit_not_a_lock = 65,   // EX_DATAERR: the name holds something that is not a lock
  exit_unavailable = 69,  // EX_UNAVAILABLE: the server cannot be reached, or is a replica
  exit_software = 70,     // EX_SOFTWARE: an unexpected failure
  exit_not_acquired =
      75,                // EX_TEMPFAIL: not acquired within --wait (or not replicated: --replicas)
  exit_lease_lost = 76,  // the lock was lost while the command ran
  exit_auth = 77,        // EX_NOPERM: credentials refused, or the ACL forbids a command
  exit_cannot_execute = 126,
  exit_command_not_found = 127,
};

/// A failure that ends the program with `code` after printing "dlock: <what>" on one line.
struct failure : std::runtime_error {
  failure(int c, const std::string& what) : std::runtime_error(what), code(c) {}
  int code;
};

/// The exit code for a dlock::error from talking to the server.
int exit_code_for(const dlock::error& e);
/// The error's message for one line on stderr: its own words (the server's, where it has some),
/// without the generic text of its code that std::system_error appends.
std::string message_of(const dlock::error& e);

/// Where Redis is, from the global flags.
struct target_flags {
  std::vector<std::string> urls;
  bool cluster = false;         // --cluster: the URLs are seeds of one cluster
  std::string sentinel_master;  // --sentinel MASTER: the URLs are sentinels
};

/// The server URL: the --url, else $DLOCK_URL, else redis://127.0.0.1:6379. Several --url
/// (RedLock) are reserved for a later version and rejected as a usage error.
std::string resolve_url(const std::vector<std::string>& urls);
/// The client options the flags describe: a server (resolve_url, or a redis-sentinel:// URL),
/// a cluster from its seeds, or a Sentinel master from its sentinels (the master's own
/// credentials from $DLOCK_MASTER_USER and $DLOCK_MASTER_PASSWORD: a password has no place on
/// a command line others can read). Throws `failure(exit_usage)` for a bad combination.
dlock::client_options resolve_target(const target_flags& flags);

/// Parses a duration flag; throws `failure(exit_usage)` naming the flag.
std::chrono::milliseconds duration_flag(const std::string& flag, const std::string& text);

/// `text` as a count of at least 1: plain decimal digits (no sign, blanks or exponent) whose
/// value fits a signed 64-bit integer, as Redis stores counts; nullopt otherwise (a number too
/// large included, never clamped).
std::optional<std::int64_t> positive_count(std::string_view text);

/// Connects, turning connection errors into `failure`s with the right exit code.
dlock::client connect(const dlock::client_options& options);

struct run_args {
  dlock::client_options target;
  int replicas = 0;                // --replicas
  std::vector<std::string> names;  // several: one multi-lock (kind reentrant only)
  std::vector<std::string> command;
  std::optional<std::chrono::milliseconds> wait;  // unset: wait forever
  std::chrono::milliseconds ttl{30'000};
  std::chrono::milliseconds grace{10'000};
  std::string kind = "reentrant";  // reentrant, simple, fair, read, write
  int lost_exit_code = exit_lease_lost;
};

/// `dlock run`: checks the kind and names (failure(exit_usage)), then `run_holding`.
int run(const run_args& args);

/// What `run_holding` got: the grant's leases (one; one per name for a multi-lock), none if the
/// wait ended first, or why it failed (`error`, `message`).
struct grant_result {
  std::vector<lease> leases;
  std::error_code error;
  std::string message;
};

/// How `run_holding` acquires, what its messages call the thing held, and what the command is
/// told. Shared by `dlock run` and `dlock sem`.
struct holding_plan {
  /// Starts the acquisition on the connected client with `options` (whose `on_lost` reports to
  /// run_holding), waiting at most `wait` (milliseconds::max(): forever; <= 0: one attempt), and
  /// calls `done` exactly once, from any thread. Returns the handle that cancels it (an empty
  /// one where it cannot be cancelled). May throw dlock::error before it starts.
  std::function<acquire_handle(const dlock::client& c, std::chrono::milliseconds wait,
                               lease_options options, std::function<void(grant_result)> done)>
      acquire;
  /// For messages: "the lock NAME", "a permit of NAME".
  std::string what;
  /// Why a wait ended without a grant, e.g. "NAME is held by someone else".
  std::string busy;
  /// The command's environment (DLOCK_NAME, DLOCK_FENCE, ...), from the grant's leases.
  std::function<std::vector<std::string>(const std::vector<lease>& leases)> environment;
};

/// For holding_plan::acquire: starts `lock.acquire_async` (any kind) and reports it as a grant.
acquire_handle acquire_lease(dlock::basic_lock& lock, std::chrono::milliseconds wait,
                             lease_options options, std::function<void(grant_result)> done);

/// Runs `args.command` while holding what `plan` acquires (args.target, wait, ttl, grace,
/// lost_exit_code; not names or kind): connects, acquires, runs the command and its whole
/// process tree, forwards signals, stops everything if the grant is lost, releases, and returns
/// the exit status `dlock run` documents (the command's own, 75, 76 or lost_exit_code, ...).
int run_holding(const run_args& args, const holding_plan& plan);

/// `dlock sem`'s options: registered on the app by `add_sem_command`, run by `sem` after
/// parsing (cli/sem_command.cpp).
struct sem_options {
  CLI::App* cmd = nullptr;
  std::string name;
  std::int64_t permits = 0;
  std::string wait_text, ttl_text = "30s", grace_text = "10s";
  int lost_exit_code = exit_lease_lost;
};
void add_sem_command(CLI::App& app, sem_options& options);
/// Runs `dlock sem` once parsed: `command` is what followed the `--` (`has_separator`).
int sem(const sem_options& options, const target_flags& target,
        const std::vector<std::string>& command, bool has_separator);
/// `dlock latch`'s operands and options: registered on the app by `add_latch_command`, run by
/// `latch` after parsing (cli/latch_command.cpp).
struct latch_options {
  CLI::App* cmd = nullptr;
  std::string name;
  std::string action;                 // set, down or wait
  std::vector<std::string> operands;  // what follows the action: set's count
  std::string wait_text;              // wait's --wait; empty: forever
};
void add_latch_command(CLI::App& app, latch_options& options);
/// Runs `dlock latch NAME set N | down | wait [--wait DUR]` and returns its exit status: 0 (set:
/// it was set; down: the count after it printed; wait: the count is 0), 1 (set: the latch
/// exists), 75 (wait: not 0 within --wait); throws `failure(exit_usage)` for bad operands and
/// dlock::error for the server's refusals.
int latch(const dlock::client_options& target, const std::string& name, const std::string& action,
          const std::vector<std::string>& operands, const std::string& wait_text);
int status(const dlock::client_options& target, const std::string& name, bool json);
/// Lists the locks on every master (all of a cluster's).
int list(const dlock::client_options& target, const std::string& pattern, bool json);
/// `kind`: "" or the kind the operator confirms for a lock left without an expiry.
int force_unlock(const dlock::client_options& target, const std::string& name,
                 const std::string& kind);
int demo(const std::string& self);
/// The paused holder of the tour, run as a separate process (`dlock _demo-holder`).
int demo_holder(const std::string& url, const std::string& name, const std::string& resource);

struct bench_args {
  std::vector<std::string> scenarios;  // empty: all
  std::string url;                     // empty: a private redis-server (DLOCK_URL is not read)
  double seconds = 3;                  // each measurement
  bool json = false;
  std::string plot_dir;  // empty: no charts
  // standalone, or cluster: a private server and a private 3-master cluster side by side
  // (redlock is reserved: a usage error).
  std::string topology = "standalone";
};
int bench(const bench_args& args);

struct market_args {
  std::string url;     // empty: a private redis-server (DLOCK_URL is not read)
  bool flush = false;  // allow FLUSHALL on the --url server
  double seconds = 60;
  std::vector<std::string> variants;  // empty: all
  std::vector<std::string> loads;     // "LISTERS/BUYERS"; empty: 1/1, 5/1, 5/5
  bool json = false;
};
int market(const market_args& args);

}  // namespace dlock::cli
