// The dlock command line: shared pieces of the subcommands.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
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
  exit_max_hold = 79,    // run --max-hold: the command still ran that long after the grant
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

/// What a subcommand gets besides its own options once the command line is parsed.
struct invocation {
  target_flags target;               ///< --url, --cluster, --sentinel
  std::vector<std::string> command;  ///< what followed "--"
  bool has_separator = false;        ///< whether there was a "--"
  std::string self;                  ///< this program's path, for the processes it starts
};

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
  int conflict_exit_code = exit_not_acquired;         // --conflict-exit-code
  std::optional<std::chrono::milliseconds> min_hold;  // --min-hold: held at least this long
  std::optional<std::chrono::milliseconds> max_hold;  // --max-hold: the command stopped then
};

/// The options `run` and `sem` share: --wait, --ttl, --grace, --lost-exit-code.
struct holding_flags {
  std::string wait_text, ttl_text = "30s", grace_text = "10s";
  int lost_exit_code = exit_lease_lost;
  int verbosity = 0;  // -v: the client's log at info level on stderr; -vv: at debug level
  /// Declares them on `cmd`; `what` names what is waited for ("the lock", "a permit").
  void add_to(CLI::App& cmd, const std::string& what);
  /// Checks "--" CMD and the durations, and fills `args` (target, command, wait, ttl, grace,
  /// lost_exit_code; with -v the target's logger). Throws failure(exit_usage) naming `subcommand`
  /// and showing `usage`.
  void apply(const invocation& in, const std::string& subcommand, const std::string& usage,
             run_args& args) const;
};

/// Declares --conflict-exit-code N (0-255) on `cmd` (run, sem), into `code`: the exit status
/// when `what` ("the lock", "a permit") was not acquired within --wait, instead of 75.
void add_conflict_exit_code(CLI::App& cmd, int& code, const std::string& what);

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
  /// For messages: the name, or several names separated by ", ".
  std::string name;
  /// Why a wait ended without a grant, e.g. "NAME is held by someone else".
  std::string busy;
  /// The command's environment (DLOCK_NAME, DLOCK_FENCE, ...), from the grant's leases.
  std::function<std::vector<std::string>(const std::vector<lease>& leases)> environment;
};

/// For holding_plan::acquire: starts `lock.acquire_async` (any kind) and reports it as a grant.
acquire_handle acquire_lease(dlock::basic_lock& lock, std::chrono::milliseconds wait,
                             lease_options options, std::function<void(grant_result)> done);

/// Runs `args.command` while holding what `plan` acquires (args.target, wait, ttl, grace,
/// lost_exit_code, conflict_exit_code, min_hold, max_hold; not names or kind): connects,
/// acquires, runs the command and its whole process tree, forwards signals, stops everything if
/// the grant is lost or max_hold has passed, holds on until min_hold has passed, releases, and
/// returns the exit status `dlock run` documents (the command's own, conflict_exit_code (75),
/// lost_exit_code (76), 79, ...).
int run_holding(const run_args& args, const holding_plan& plan);

/// One subcommand: its `add_*_command` function (in its own file) declares it on the app with
/// its options and operands; `run` carries it out once the command line has been parsed.
class subcommand {
 public:
  explicit subcommand(CLI::App* app) : app_(app) {}
  virtual ~subcommand() = default;
  subcommand(const subcommand&) = delete;
  subcommand& operator=(const subcommand&) = delete;
  /// Whether the command line named this subcommand.
  bool chosen() const;
  /// Whether "-- CMD" may follow its arguments (run, sem); a "--" elsewhere is a usage error.
  virtual bool takes_command() const { return false; }
  /// Runs it and returns dlock's exit status; throws `failure` or dlock::error, which main turns
  /// into one line on stderr and the documented exit code.
  virtual int run(const invocation& in) = 0;

 protected:
  CLI::App* app_;
};

std::unique_ptr<subcommand> add_run_command(CLI::App& app);
std::unique_ptr<subcommand> add_sem_command(CLI::App& app);
std::unique_ptr<subcommand> add_latch_command(CLI::App& app);
std::unique_ptr<subcommand> add_status_command(CLI::App& app);
std::unique_ptr<subcommand> add_ls_command(CLI::App& app);
std::unique_ptr<subcommand> add_watch_command(CLI::App& app);
std::unique_ptr<subcommand> add_unlock_command(CLI::App& app);
std::unique_ptr<subcommand> add_market_command(CLI::App& app);
std::unique_ptr<subcommand> add_bench_command(CLI::App& app);
/// `demo`, and the tour's paused holder it starts as a separate process (`_demo-holder`).
std::unique_ptr<subcommand> add_demo_command(CLI::App& app);
std::unique_ptr<subcommand> add_demo_holder_command(CLI::App& app);

}  // namespace dlock::cli
