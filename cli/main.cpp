// dlock: distributed locks on Redis from the shell.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <iostream>

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

bool subcommand::chosen() const {
  return app_->parsed();
}

void holding_flags::add_to(CLI::App& cmd, const std::string& what) {
  cmd.add_option("--wait", wait_text,
                 "How long to wait for " + what + " (default: forever; 0 = one attempt)")
      ->type_name("DUR");
  cmd.add_option("--ttl", ttl_text,
                 "The lease of " + what + ", renewed while CMD runs (default 30s)")
      ->type_name("DUR");
  cmd.add_option("--grace", grace_text,
                 "After a lost lease, SIGTERM then SIGKILL after this (default 10s)")
      ->type_name("DUR");
  cmd.add_option("--lost-exit-code", lost_exit_code,
                 "Exit with this instead of 76 when the lease was lost, so that a command's "
                 "own 76 can be told apart")
      ->check(CLI::Range(1, 255))
      ->type_name("N");
  cmd.add_flag("-v,--verbose", verbosity,
               "Log reconnects, failovers, failed renewals and lost leases to stderr; -vv also "
               "every grant and release");
}

namespace {
// One line per call and one write(2) per line, so that the command's own stderr output, which
// shares the descriptor, never splits one.
void log_to_stderr(log_level level, std::string_view message) {
  std::string line = "dlock: ";
  line.append(to_string(level)).append(": ").append(message).append("\n");
  for (std::string_view rest = line; !rest.empty();) {
    const auto n = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}
}  // namespace

void holding_flags::apply(const invocation& in, const std::string& subcommand,
                          const std::string& usage, run_args& args) const {
  if (!in.has_separator) {
    throw failure(exit_usage, subcommand + ": missing '--' before the command (" + usage + ")");
  }
  if (in.command.empty()) throw failure(exit_usage, subcommand + ": no command after '--'");
  args.target = resolve_target(in.target);
  args.command = in.command;
  if (!wait_text.empty()) args.wait = duration_flag("--wait", wait_text);
  args.ttl = duration_flag("--ttl", ttl_text);
  args.grace = duration_flag("--grace", grace_text);
  if (args.ttl < std::chrono::milliseconds(100)) {
    throw failure(exit_usage, subcommand + ": --ttl must be at least 100ms");
  }
  args.lost_exit_code = lost_exit_code;
  if (verbosity > 0) {
    args.target.logger = log_to_stderr;
    args.target.min_log_level = verbosity > 1 ? log_level::debug : log_level::info;
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
  dlock watch                                         a live view of the locks, as they change
  dlock unlock --force nightly-report
  dlock demo                                          a tour on a private redis-server
  dlock bench --seconds 1                             the locks beside same-run references
  dlock market --seconds 3                            Redis in Action's marketplace, beside the book

The server: --url URL, else $DLOCK_URL, else redis://127.0.0.1:6379.
  URL forms: redis://[user[:password]@]host[:port][/db], rediss://... (TLS), unix:///path,
  redis-sentinel://host1[:port1],host2...#MASTER; valkey://, valkeys://, valkey-sentinel://
  TLS options as query: ?ca=FILE&cert=FILE&key=FILE&verify=none&sni=NAME

Options before the subcommand or after it, anywhere before "--". A name that starts with "-"
comes after "--" (dlock status -- -x; dlock run -- -x -- CMD).

Exit codes: 0 ok (run: the command's own status; 128+N if a signal N ended it), 1 latch set:
  the latch exists, 64 usage error, 65 the name holds something that is not a lock, 69 server
  unreachable (or a replica, or still loading when --wait ran out), 70 internal error, 75 lock
  (sem: permit) not acquired within --wait (--conflict-exit-code; latch wait: the count not 0),
  76 lock (permit) lost while the command ran (--lost-exit-code), 77 credentials refused or the
  ACL forbids a command, 79 run --max-hold stopped the command, 126/127 command not runnable.)";

// Options that take a value as the next argument (unless given as --option=value).
bool takes_value(std::string_view option) {
  static constexpr std::string_view with_value[] = {
      "--url",      "--wait",     "--ttl",      "--grace",    "--kind",     "--lost-exit-code",
      "--seconds",  "--variants", "--loads",    "--plot",     "--sentinel", "--conflict-exit-code",
      "--topology", "--permits",  "--min-hold", "--max-hold", "--replicas", "--shell",
      "-c"};
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
  invocation in;
  auto& target = in.target;
  // One value per --url: a vector option would otherwise swallow the arguments after it.
  app.add_option("--url", target.urls,
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

  std::unique_ptr<subcommand> subcommands[] = {
      add_run_command(app),    add_sem_command(app),        add_latch_command(app),
      add_status_command(app), add_ls_command(app),         add_watch_command(app),
      add_unlock_command(app), add_market_command(app),     add_demo_command(app),
      add_bench_command(app),  add_demo_holder_command(app)};

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
  in.command = split.command;
  in.has_separator = split.has_separator;
  in.self = self_path(argv[0]);
  for (const auto& sub : subcommands) {
    if (!sub->chosen()) continue;
    if (in.has_separator && !sub->takes_command()) {
      throw failure(exit_usage, "'--' is only meaningful for run and sem");
    }
    return sub->run(in);
  }
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
