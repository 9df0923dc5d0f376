// dlock: distributed locks on Redis from the shell.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <iostream>

#include "bench_run.hpp"
#include "cli.hpp"
#include "display.hpp"
#include "dlock/redis/connection_options.hpp"
#include "dlock/version.hpp"

namespace dlock::cli {

int exit_code_for(const dlock::error& e) {
  const auto ec = e.code();
  if (ec == errc::invalid_url || ec == errc::invalid_argument) return exit_usage;
  if (ec == errc::wrong_type) return exit_not_a_lock;
  if (ec == errc::not_replicated) return exit_not_acquired;  // granted, but not replicated: undone
  if (ec == errc::auth_failed || ec == errc::permission_denied) return exit_auth;
  if (ec == errc::connect_failed || ec == errc::tls_failed || ec == errc::timeout ||
      ec == errc::connection_lost || ec == errc::server_busy || ec == errc::read_only) {
    return exit_unavailable;
  }
  return exit_software;
}

std::string message_of(const dlock::error& e) {
  std::string what = e.what();
  const std::string suffix = ": " + e.code().message();
  if (what.size() > suffix.size() && what.ends_with(suffix))
    what.resize(what.size() - suffix.size());
  return what;
}

std::string resolve_url(const std::vector<std::string>& urls) {
  if (urls.size() > 1) {
    throw failure(exit_usage,
                  "this command takes one --url (several are for run, status, ls and "
                  "unlock: RedLock's masters)");
  }
  if (!urls.empty()) return urls.front();
  if (const char* env = std::getenv("DLOCK_URL"); env && *env) return env;
  return "redis://127.0.0.1:6379";
}

dlock::client_options resolve_target(const target_flags& flags) {
  try {
    if (flags.cluster && !flags.sentinel_master.empty()) {
      throw failure(exit_usage, "--cluster and --sentinel exclude each other");
    }
    if (flags.cluster) {
      std::vector<std::string> seeds = flags.urls;
      if (seeds.empty()) seeds.push_back(resolve_url({}));
      return client_options::cluster(seeds);
    }
    if (!flags.sentinel_master.empty()) {
      if (flags.urls.empty()) {
        throw failure(exit_usage, "--sentinel needs one --url per sentinel (redis://host:26379)");
      }
      client_options o;
      o.sentinel.master_name = flags.sentinel_master;
      for (const auto& url : flags.urls)
        o.sentinel.sentinels.push_back(connection_options::from_url(url));
      // The data nodes share the sentinels' TLS and timeouts, never their credentials.
      o.connection = o.sentinel.sentinels.front();
      o.connection.user.clear();
      o.connection.password.clear();
      o.connection.database = 0;
      if (const char* u = std::getenv("DLOCK_MASTER_USER")) o.connection.user = u;
      if (const char* p = std::getenv("DLOCK_MASTER_PASSWORD")) o.connection.password = p;
      return o;
    }
    // Several servers without --cluster or --sentinel: RedLock's independent masters.
    if (flags.urls.size() > 1) return client_options::redlock_masters(flags.urls);
    return client_options::from_url(resolve_url(flags.urls));
  } catch (const dlock::error& e) {
    throw failure(exit_code_for(e), message_of(e));
  }
}

std::chrono::milliseconds duration_flag(const std::string& flag, const std::string& text) {
  try {
    return parse_duration(text);
  } catch (const dlock::error&) {
    throw failure(exit_usage, "invalid duration '" + text + "' for " + flag +
                                  " (expected e.g. 500ms, 10s, 2m)");
  }
}

std::optional<std::int64_t> positive_count(std::string_view text) {
  std::int64_t n = 0;
  const auto* end = text.data() + text.size();
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  const auto [stop, ec] = std::from_chars(text.data(), end, n);
  if (ec != std::errc() || stop != end || n < 1) return std::nullopt;
  return n;
}

dlock::client connect(const dlock::client_options& options) {
  try {
    return dlock::client(options);
  } catch (const dlock::error& e) {
    throw failure(exit_code_for(e), message_of(e));
  }
}

namespace {

const char* const overview = R"(Distributed locks on Redis, from the shell.

Examples:
  dlock run nightly-report -- ./make-report.sh       run on exactly one machine at a time
  dlock run --wait 0 backup -- ./backup.sh            give up at once if another run holds it
  dlock run --wait 5m --ttl 10s deploy -- make deploy
  dlock run --kind read catalog -- ./export.sh        readers share, --kind write excludes them
  dlock run accounts ledger -- ./transfer.sh          both locks, all or nothing, no deadlock
  dlock sem encoders --permits 4 -- ./encode.sh       at most 4 at once
  dlock latch batch-7 wait --wait 1h                  until `dlock latch batch-7 down` ran N times
  dlock status nightly-report --json
  dlock ls 'deploy*'
  dlock unlock --force nightly-report
  dlock demo                                          a tour on a private redis-server
  dlock bench --seconds 1                             the locks beside same-run references
  dlock market --seconds 3                            Redis in Action's marketplace, beside the book

The server: --url URL, else $DLOCK_URL, else redis://127.0.0.1:6379.
  URL forms: redis://[user[:password]@]host[:port][/db], rediss://... (TLS), unix:///path
  TLS options as query: ?ca=FILE&cert=FILE&key=FILE&verify=none&sni=NAME

Options before the subcommand or after it, anywhere before "--". A name that starts with "-"
comes after "--" (dlock status -- -x; dlock run -- -x -- CMD).

Exit codes: 0 ok (run: the command's own status; 128+N if a signal N ended it), 1 latch set:
  the latch exists, 64 usage error, 65 the name holds something that is not a lock, 69 server
  unreachable (or a replica, or still loading when --wait ran out), 70 internal error, 75 lock
  (sem: permit) not acquired within --wait (latch wait: the count not 0), 76 lock (permit) lost
  while the command ran (--lost-exit-code), 77 credentials refused or the ACL forbids a command,
  126/127 command not runnable.)";

// Options that take a value as the next argument (unless given as --option=value).
bool takes_value(std::string_view option) {
  static constexpr std::string_view with_value[] = {
      "--url",      "--wait",     "--ttl",   "--grace", "--kind",     "--lost-exit-code",
      "--seconds",  "--variants", "--loads", "--plot",  "--sentinel", "--replicas",
      "--topology", "--permits"};
  return std::find(std::begin(with_value), std::end(with_value), option) != std::end(with_value);
}

// Splits the arguments into dlock's own and the command `dlock run` starts. The command begins
// after the "--" that follows the lock name; a "--" before any name says only that what follows
// are names, even names that start with "-" (dlock run -- -x -- CMD). For the other
// subcommands a "--" has that second meaning only (dlock status -- -x).
struct split_args {
  std::vector<std::string> ours;
  std::vector<std::string> command;
  bool has_separator = false;
};

split_args split_at_separator(int argc, char** argv) {
  split_args s;
  std::string subcommand;
  bool names_follow = false;  // a "--" came before any name
  int names = 0;
  bool value_next = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (value_next) {
      value_next = false;
      s.ours.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      const bool runs = subcommand == "run" || subcommand == "sem";  // a command follows
      if (!runs || (names == 0 && !names_follow)) {
        names_follow = true;
        s.ours.emplace_back(arg);
        if (runs) continue;
        for (++i; i < argc; ++i)  // everything else is positional for CLI11
          s.ours.emplace_back(argv[i]);
        break;
      }
      s.has_separator = true;
      for (++i; i < argc; ++i)
        s.command.emplace_back(argv[i]);
      break;
    }
    s.ours.emplace_back(arg);
    if (names_follow) {
      ++names;
    } else if (arg.starts_with("-")) {
      value_next = takes_value(arg);
    } else if (subcommand.empty()) {
      subcommand = arg;
    } else {
      ++names;
    }
  }
  return s;
}

std::string self_path(const char* argv0) {
  char buf[PATH_MAX];
  const auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) return std::string(buf, static_cast<std::size_t>(n));
  return argv0;
}

int main_impl(int argc, char** argv) {
  CLI::App app(overview, "dlock");
  app.set_version_flag("--version", std::string("dlock ") + dlock::version);
  app.require_subcommand(1);
  app.fallthrough();
  target_flags target;
  auto& urls = target.urls;
  // One value per --url: a vector option would otherwise swallow the arguments after it.
  app.add_option("--url", urls,
                 "Redis URL (repeatable: cluster seeds with --cluster, sentinels with "
                 "--sentinel; three or more without either = RedLock's independent masters)")
      ->type_name("URL")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--cluster", target.cluster, "The --url servers are seeds of one Redis Cluster");
  app.add_option("--sentinel", target.sentinel_master,
                 "Redis runs under Sentinel as MASTER; each --url is a sentinel (the master's "
                 "credentials: $DLOCK_MASTER_USER, $DLOCK_MASTER_PASSWORD)")
      ->type_name("MASTER")
      ->check(CLI::Validator(
          [](std::string& master) -> std::string {
            return master.empty() ? "expected the name of the master Sentinel monitors, got ''"
                                  : "";
          },
          "MASTER"));

  run_args run_opts;
  std::string wait_text, ttl_text = "30s", grace_text = "10s";
  auto* run_cmd =
      app.add_subcommand("run", "Run CMD while holding the lock NAME; a distributed flock(1)");
  run_cmd->footer(R"(
Runs CMD with DLOCK_NAME and DLOCK_FENCE (the grant's fencing token) in its environment, renews
the lock while CMD runs, forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 sent to dlock, and
releases the lock when CMD and every process it started have exited, exiting with CMD's status.
If the lock is lost, CMD and all its descendants get SIGTERM, then SIGKILL after --grace, and
dlock exits 76 (or --lost-exit-code); also when the lease ran out while dlock itself was paused.
Not acquired within --wait: exit 75. A name starting with "-": dlock run -- -name -- CMD.
--kind fair: first come, first served across machines; read/write: the two sides of a read-write
lock (readers share). Several names: all of them at once or none (reentrant locks taken in one
global order, never deadlocking); DLOCK_FENCE is then the first name's token and DLOCK_FENCES
lists "NAME=FENCE" for every name, separated by spaces.

Examples:
  dlock run report -- ./report.sh
  dlock run --wait 30s --ttl 15s --kind simple db-migrate -- ./migrate up
  dlock run --kind write catalog -- ./import.sh
  dlock run accounts ledger -- ./transfer.sh
  */5 * * * *  dlock --url redis://redis.internal run --wait 0 cleanup -- /opt/cleanup)");
  run_cmd
      ->add_option("--wait", wait_text,
                   "How long to wait for the lock (default: forever; 0 = one attempt)")
      ->type_name("DUR");
  run_cmd->add_option("--ttl", ttl_text, "Lease, renewed while CMD runs (default 30s)")
      ->type_name("DUR");
  run_cmd
      ->add_option("--grace", grace_text,
                   "After a lost lease, SIGTERM then SIGKILL after this (default 10s)")
      ->type_name("DUR");
  run_cmd
      ->add_option("--kind", run_opts.kind,
                   "reentrant (Redisson layout, default), simple, fair, read or write (the two "
                   "sides of a read-write lock)")
      ->type_name("KIND");
  run_cmd
      ->add_option("--lost-exit-code", run_opts.lost_exit_code,
                   "Exit with this instead of 76 when the lock was lost, so that a command's "
                   "own 76 can be told apart")
      ->check(CLI::Range(1, 255))
      ->type_name("N");
  run_cmd
      ->add_option("--replicas", run_opts.replicas,
                   "A grant counts only once N replicas acknowledged it (WAIT); otherwise it is "
                   "undone and retried within --wait, then exit 75")
      ->type_name("N");
  run_cmd->add_option("name", run_opts.names, "Lock name; several: all of them (a multi-lock)")
      ->required();

  sem_options sem_opts;
  add_sem_command(app, sem_opts);
  latch_options latch_opts;
  add_latch_command(app, latch_opts);

  std::string status_name;
  bool status_json = false;
  auto* status_cmd =
      app.add_subcommand("status", "Show a lock or semaphore: kind, holders, TTL, fence, waiters");
  status_cmd->add_option("name", status_name, "Lock name")->required();
  status_cmd->add_flag("--json", status_json, "Print JSON (schema: docs/cli.md)");
  status_cmd->footer(
      "\nKinds: reentrant, simple, fair (and its queue), read-write (and its mode), leased "
      "semaphore (free and leased permits), semaphore or latch (a bare count), free.\n"
      "Examples:\n  dlock status nightly-report\n  dlock status deploy --json");

  std::string pattern = "*";
  bool ls_json = false;
  auto* ls_cmd =
      app.add_subcommand("ls", "List locks and semaphores (SCAN, never KEYS) with status columns");
  ls_cmd->add_option("pattern", pattern, "Glob on lock names (default *)");
  ls_cmd->add_flag("--json", ls_json, "Print JSON (schema: docs/cli.md)");
  ls_cmd->footer("\nExamples:\n  dlock ls\n  dlock ls 'deploy:*' --json");

  std::string unlock_name, unlock_kind;
  bool force = false;
  auto* unlock_cmd = app.add_subcommand(
      "unlock", "Delete a lock whoever holds it, wake its waiters, say what was removed");
  unlock_cmd->add_option("name", unlock_name, "Lock name")->required();
  unlock_cmd->add_flag("--force", force, "Required: the holder loses the lock")->required();
  unlock_cmd
      ->add_option("--kind", unlock_kind,
                   "reentrant or simple: confirms that a key in that lock's layout but without "
                   "an expiry is a lock")
      ->check(CLI::IsMember({"reentrant", "simple"}))
      ->type_name("KIND");
  unlock_cmd->footer(R"(
Only locks are deleted: a key that is not in a lock's layout (a list, a JSON string, a hash of
user fields, a counter) is refused with exit 65 and left alone; so is a lock-like key without an
expiry, unless --kind confirms it.
Example:
  dlock unlock --force nightly-report)");

  market_args market_opts;
  auto* market_cmd = app.add_subcommand(
      "market",
      "Redis in Action's marketplace: WATCH vs locks vs fine-grained locks (docs/cli.md)");
  market_cmd->add_option("--seconds", market_opts.seconds, "Length of each run (default 60)")
      ->check(CLI::Range(0.1, 3600.0))
      ->type_name("N");
  market_cmd
      ->add_option("--variants", market_opts.variants,
                   "Comma-separated: watch, book-lock, book-fine, dlock-coarse, dlock-fine, "
                   "no-lock, script")
      ->delimiter(',')
      ->type_name("LIST");
  market_cmd
      ->add_option("--loads", market_opts.loads,
                   "Comma-separated LISTERS/BUYERS (default 1/1,5/1,5/5)")
      ->delimiter(',')
      ->type_name("LIST");
  market_cmd->add_flag("--json", market_opts.json, "Print JSON (schema: docs/cli.md)");
  market_cmd->add_flag("--flush", market_opts.flush,
                       "Allow FLUSHALL on the --url server (required with --url)");
  market_cmd->footer(R"(
Every run starts on a flushed database, so by default it brings its own redis-server.
Examples:
  dlock market --seconds 3
  dlock market --variants watch,dlock-fine --loads 5/5 --json
  dlock --url redis://scratch:6379 market --flush)");

  auto* demo_cmd = app.add_subcommand("demo", "A tour on a private redis-server (under a minute)");

  bench_args bench_opts;
  auto* bench_cmd = app.add_subcommand(
      "bench", "Benchmark the locks beside references measured in the same run (docs/cli.md)");
  bench_cmd->add_option("scenario", bench_opts.scenarios, "Scenarios to run (default: all)")
      ->check(CLI::IsMember(dlock::bench::scenario_names()))
      ->type_name("SCENARIO");
  bench_cmd->add_option("--seconds", bench_opts.seconds, "Each measurement's duration (default 3)")
      ->check([](const std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || !(v > 0) || v > 3600) {
          return "expected a number of seconds above 0 and at most 3600, got '" + text + "'";
        }
        return "";
      })
      ->type_name("N");
  bench_cmd->add_flag("--json", bench_opts.json, "Print JSON (schema: docs/cli.md)");
  bench_cmd->add_option("--plot", bench_opts.plot_dir, "Also draw PNG charts (gnuplot) into DIR")
      ->type_name("DIR");
  bench_cmd
      ->add_option("--topology", bench_opts.topology,
                   "standalone (default); cluster: a private 3-master cluster beside a private "
                   "server (throughput, watchdog); redlock: five private RedLock masters beside "
                   "a private server (uncontended, throughput, handoff)")
      ->check(CLI::IsMember(dlock::bench::topology_names()))
      ->type_name("TOPOLOGY");
  bench_cmd->footer(R"(
Scenarios: uncontended (lock+unlock pairs, one thread), throughput (pairs/s against threads,
beside redis-benchmark), handoff (8 workers contending for one key, beside a try_acquire spin),
watchdog (10,000 leases renewed in batches). Each row shows dlock, a reference measured in the
same run and their ratio. The server is a private redis-server unless --url is given explicitly
($DLOCK_URL is not used: the benchmark loads the server and writes dlock-bench:* keys).
--topology cluster starts a private 3-master Redis Cluster and a private redis-server (never
--url) and runs throughput (16 and 64 threads) and watchdog on both: the cluster's figures
beside the standalone's, their ratio, and the commands each master received.
--topology redlock starts five private independent masters and a private redis-server (never
--url) and runs uncontended, throughput (16 threads) and handoff (8 clients) on both: RedLock's
figures beside the standalone's, and their ratio.

Examples:
  dlock bench --seconds 1
  dlock bench throughput handoff --plot /tmp/dlock-plots
  dlock --url redis://redis.test:6379 bench uncontended --json
  dlock bench --topology cluster --seconds 2
  dlock bench --topology redlock --seconds 2)");

  std::string holder_url, holder_name, holder_resource;
  auto* holder_cmd = app.add_subcommand("_demo-holder", "");
  holder_cmd->group("");  // hidden: the tour's paused holder
  holder_cmd->add_option("url", holder_url)->required();
  holder_cmd->add_option("name", holder_name)->required();
  holder_cmd->add_option("resource", holder_resource)->required();

  const auto split = split_at_separator(argc, argv);
  std::vector<std::string> reversed(split.ours.rbegin(), split.ours.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::cerr << "dlock: " << what << " (see dlock --help)\n";
    return exit_usage;
  }

  if (*run_cmd) {
    if (!split.has_separator) {
      throw failure(exit_usage, "run: missing '--' before the command (dlock run NAME -- CMD)");
    }
    if (split.command.empty()) throw failure(exit_usage, "run: no command after '--'");
    run_opts.target = resolve_target(target);
    if (run_opts.replicas < 0) throw failure(exit_usage, "run: --replicas must not be negative");
    run_opts.target.min_replica_acks = run_opts.replicas;
    run_opts.command = split.command;
    if (!wait_text.empty()) run_opts.wait = duration_flag("--wait", wait_text);
    run_opts.ttl = duration_flag("--ttl", ttl_text);
    run_opts.grace = duration_flag("--grace", grace_text);
    if (run_opts.ttl < std::chrono::milliseconds(100)) {
      throw failure(exit_usage, "run: --ttl must be at least 100ms");
    }
    return run(run_opts);
  }
  if (*sem_opts.cmd) return sem(sem_opts, target, split.command, split.has_separator);
  if (split.has_separator) throw failure(exit_usage, "'--' is only meaningful for run and sem");
  if (*status_cmd) return status(resolve_target(target), status_name, status_json);
  if (*latch_opts.cmd) {
    return latch(resolve_target(target), latch_opts.name, latch_opts.action, latch_opts.operands,
                 latch_opts.wait_text);
  }
  if (*ls_cmd) return list(resolve_target(target), pattern, ls_json);
  if (*unlock_cmd) return force_unlock(resolve_target(target), unlock_name, unlock_kind);
  if (*demo_cmd) return demo(self_path(argv[0]));
  if (*market_cmd) {
    // Only an explicit --url, and only with --flush: every run begins with FLUSHALL.
    if (!urls.empty()) market_opts.url = resolve_url(urls);
    return market(market_opts);
  }
  if (*bench_cmd) {
    // Only an explicit --url: DLOCK_URL must not send a benchmark to a shared server silently.
    if (!urls.empty()) bench_opts.url = resolve_url(urls);
    return bench(bench_opts);
  }
  if (*holder_cmd) return demo_holder(holder_url, holder_name, holder_resource);
  return exit_usage;
}

}  // namespace
}  // namespace dlock::cli

int main(int argc, char** argv) {
  using namespace dlock::cli;
  // One line on stderr whatever a message holds: names may carry newlines or any bytes.
  try {
    return main_impl(argc, argv);
  } catch (const failure& f) {
    std::cerr << "dlock: " << escaped(f.what()) << "\n";
    return f.code;
  } catch (const dlock::error& e) {
    std::cerr << "dlock: " << escaped(message_of(e)) << "\n";
    return exit_code_for(e);
  } catch (const std::exception& e) {
    std::cerr << "dlock: " << escaped(e.what()) << "\n";
    return exit_software;
  }
}
