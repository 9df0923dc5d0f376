// dlock_client_bench — throughput of dlock's multiplexed, auto-pipelined client next to
// redis-benchmark, against the same server at the same concurrency, in one invocation.
//
// A scenario with N callers runs N threads that share ONE dlock::redis_client and issue
// synchronous commands in a loop, so each caller has exactly one command outstanding. The
// reference is `redis-benchmark -c N -P 1`: N connections, one command outstanding on each.
// Both runs of a pair go back to back because a shared machine is noisy; with --repeat R the
// pairs repeat (alternating which side goes first) and medians are reported.

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <dlock/dlock.hpp>
#include <nlohmann/json.hpp>

#include "embedded/redis_server.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

// ctest's SKIP_RETURN_CODE: redis-server or redis-benchmark is not installed.
constexpr int exit_skip = 77;

// INCR makes the script do a real key write rather than only crossing into Lua. Both sides run
// this exact script on this one key (redis-benchmark cannot vary the key per connection).
constexpr std::string_view bench_script = "return redis.call('INCR', KEYS[1])";
constexpr std::string_view bench_key = "dlock-bench:counter";

enum class scenario_kind { ping, evalsha };

struct scenario {
  scenario_kind kind;
  std::string name;
};

struct settings {
  double seconds = 3;
  std::string url;
  int repeat = 3;
  bool json = false;
  std::vector<int> callers{1, 16, 64};
  std::string only;
  std::string redis_benchmark = "redis-benchmark";
};

// ---------------------------------------------------------------------------------------------
// Our side

struct dlock_sample {
  double ops_per_sec = 0;
  double commands_per_write = 0;
};

dlock_sample run_dlock(const std::string& url, const scenario& sc, const dlock::script& s,
                       int callers, double seconds) {
  // A fresh client per run, so no connection state or counters carry over between runs.
  dlock::redis_client client(url);
  const std::array<std::string_view, 1> keys{bench_key};
  const auto call = [&] {
    if (sc.kind == scenario_kind::ping) {
      client.command({"PING"});
    } else {
      client.eval(s, keys, std::span<const std::string_view>());
    }
  };

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> total_ops{0};
  std::latch ready(callers);  // every caller has done its warm-up call
  std::latch go(1);           // the timed window starts
  bool released = false;
  const auto release = [&] {
    if (!released) go.count_down();
    released = true;
  };
  std::mutex failure_mutex;
  std::exception_ptr failure;

  std::vector<std::jthread> threads;  // joined on every path, including exceptions
  threads.reserve(static_cast<std::size_t>(callers));
  try {
    for (int i = 0; i < callers; ++i) {
      threads.emplace_back([&] {
        std::uint64_t ops = 0;  // thread-local count: no shared cache line in the hot loop
        bool counted = false;
        try {
          call();  // warm-up: threads running, script cached, connection settled
          ready.count_down();
          counted = true;
          go.wait();
          while (!stop.load(std::memory_order_relaxed)) {
            call();
            ++ops;
          }
        } catch (...) {
          const std::lock_guard lock(failure_mutex);
          if (!failure) failure = std::current_exception();
          stop = true;
          if (!counted) ready.count_down();  // the main thread must not wait for us forever
        }
        total_ops += ops;
      });
    }
  } catch (...) {
    stop = true;
    release();
    throw;
  }

  ready.wait();
  const auto before = client.counters();
  const auto t0 = clock_type::now();
  release();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads)
    t.join();
  // Every counted call completed inside [t0, t1].
  const auto t1 = clock_type::now();
  const auto after = client.counters();
  if (failure) std::rethrow_exception(failure);

  const double elapsed = std::chrono::duration<double>(t1 - t0).count();
  const auto writes = after.writes - before.writes;
  return {static_cast<double>(total_ops.load()) / elapsed,
          writes == 0 ? 0.0
                      : static_cast<double>(after.commands_sent - before.commands_sent) /
                            static_cast<double>(writes)};
}

// ---------------------------------------------------------------------------------------------
// redis-benchmark

struct process_output {
  int status = 0;
  std::string text;  // stdout and stderr, interleaved
};

// fork/exec rather than popen: no shell quoting, and the child gets PR_SET_PDEATHSIG so it
// cannot outlive us if we are killed mid-run. A child that overruns `timeout` is killed; either
// way it is reaped before this returns.
process_output run_and_capture(const std::vector<std::string>& argv,
                               std::chrono::milliseconds timeout) {
  std::vector<char*> cargv;
  for (const auto& a : argv)
    cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::system_category(), "pipe");
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::system_error(err, std::system_category(), "fork");
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    ::dup2(fds[1], STDOUT_FILENO);            // dup2 clears O_CLOEXEC on the copies
    ::dup2(fds[1], STDERR_FILENO);
    ::execvp(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(fds[1]);

  process_output out;
  bool timed_out = false;
  const auto deadline = clock_type::now() + timeout;
  char buf[4096];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      out.text.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;  // EOF: the child is done (or closed its output)
    }
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  while (::waitpid(pid, &out.status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) throw std::runtime_error(argv[0] + " did not finish in time; killed it");
  return out;
}

// Splits one CSV line; fields may be quoted, with "" standing for a quote.
std::vector<std::string> split_csv(std::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

// Reads the requests/second from `redis-benchmark --csv` output: the "rps" column named by the
// header row (Redis ≥ 7), else the second field (older versions print no header). Anything
// else (warnings, progress lines ending in \r) is skipped.
double parse_rps(const std::string& output) {
  std::optional<std::size_t> column;
  std::size_t start = 0;
  while (start < output.size()) {
    const auto end = std::min(output.find_first_of("\r\n", start), output.size());
    const auto fields = split_csv(std::string_view(output).substr(start, end - start));
    start = end + 1;
    if (!column && fields.size() > 1 && fields[0] == "test") {
      const auto it = std::find(fields.begin(), fields.end(), "rps");
      if (it != fields.end()) column = static_cast<std::size_t>(it - fields.begin());
      continue;
    }
    const std::size_t col = column.value_or(1);
    if (fields.size() <= col) continue;
    const auto& f = fields[col];
    double rps = 0;
    const auto [ptr, ec] = std::from_chars(f.data(), f.data() + f.size(), rps);
    if (ec == std::errc() && ptr == f.data() + f.size() && rps > 0) return rps;
  }
  throw std::runtime_error("no requests/second found in redis-benchmark output:\n" + output);
}

// redis-benchmark's connection flags for the server the dlock client talks to.
std::vector<std::string> server_flags(const dlock::connection_options& co) {
  std::vector<std::string> f;
  if (!co.unix_path.empty()) {
    f.insert(f.end(), {"-s", co.unix_path});
  } else {
    f.insert(f.end(), {"-h", co.host, "-p", std::to_string(co.port)});
  }
  if (!co.password.empty()) {
    f.insert(f.end(), {"-a", co.password});
    if (!co.user.empty()) f.insert(f.end(), {"--user", co.user});
  }
  if (co.database != 0) f.insert(f.end(), {"--dbnum", std::to_string(co.database)});
  if (co.tls.enabled) {
    f.emplace_back("--tls");
    if (!co.tls.ca_file.empty()) f.insert(f.end(), {"--cacert", co.tls.ca_file});
    if (!co.tls.cert_file.empty()) f.insert(f.end(), {"--cert", co.tls.cert_file});
    if (!co.tls.key_file.empty()) f.insert(f.end(), {"--key", co.tls.key_file});
    if (!co.tls.verify_peer) f.emplace_back("--insecure");
    if (!co.tls.server_name.empty()) f.insert(f.end(), {"--sni", co.tls.server_name});
  }
  return f;
}

double run_reference(const settings& cfg, const std::vector<std::string>& server,
                     const scenario& sc, const std::string& sha, int callers,
                     std::int64_t requests) {
  std::vector<std::string> argv{cfg.redis_benchmark};
  argv.insert(argv.end(), server.begin(), server.end());
  argv.insert(argv.end(), {"-c", std::to_string(callers), "-n", std::to_string(requests), "-P", "1",
                           "--csv", "-q"});
  if (sc.kind == scenario_kind::ping) {
    // PING sent as a multi-bulk array, exactly as our client sends it.
    argv.insert(argv.end(), {"-t", "ping_mbulk"});
  } else {
    argv.insert(argv.end(), {"evalsha", sha, "1", std::string(bench_key)});
  }
  // Generous: a run that takes 20x longer than planned means something is wrong.
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(60 + cfg.seconds * 20));
  const auto out = run_and_capture(argv, timeout);
  if (!WIFEXITED(out.status) || WEXITSTATUS(out.status) != 0) {
    throw std::runtime_error(cfg.redis_benchmark + " failed (status " + std::to_string(out.status) +
                             "):\n" + out.text);
  }
  return parse_rps(out.text);
}

// ---------------------------------------------------------------------------------------------
// Driver

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct result {
  std::string scenario;
  int callers = 0;
  double dlock = 0;
  double reference = 0;
  double ratio = 0;
  double commands_per_write = 0;
};

result measure(const settings& cfg, const std::string& url, const std::vector<std::string>& server,
               const scenario& sc, const dlock::script& s, int callers) {
  std::vector<double> ours, theirs, ratios, per_write;
  // redis-benchmark takes a request count, not a duration: size it from the last rate seen for
  // this pair so both sides run about `seconds`.
  double reference_estimate = 0;
  for (int rep = 0; rep < cfg.repeat; ++rep) {
    dlock_sample d;
    double ref = 0;
    const auto run_ours = [&] { d = run_dlock(url, sc, s, callers, cfg.seconds); };
    const auto run_theirs = [&] {
      const double rate = reference_estimate > 0 ? reference_estimate : d.ops_per_sec;
      const auto requests = std::max<std::int64_t>(std::max(1000, callers * 10),
                                                   static_cast<std::int64_t>(rate * cfg.seconds));
      ref = run_reference(cfg, server, sc, s.sha1(), callers, requests);
      reference_estimate = ref;
    };
    // Alternate which side goes first, so neither always gets the "fresher" machine. The first
    // pair runs ours first because its rate sizes redis-benchmark's first run.
    if (rep % 2 == 0) {
      run_ours();
      run_theirs();
    } else {
      run_theirs();
      run_ours();
    }
    std::fprintf(stderr,
                 "  %-8s %3d callers  #%d: dlock %10.0f ops/s  redis-benchmark %10.0f ops/s\n",
                 sc.name.c_str(), callers, rep + 1, d.ops_per_sec, ref);
    ours.push_back(d.ops_per_sec);
    theirs.push_back(ref);
    ratios.push_back(d.ops_per_sec / ref);
    per_write.push_back(d.commands_per_write);
  }
  // The ratio is the median of per-pair ratios: each pair shares the machine's momentary state.
  return {sc.name, callers, median(ours), median(theirs), median(ratios), median(per_write)};
}

std::string server_version(dlock::redis_client& control) {
  const auto info = control.command({"INFO", "server"}).str();
  const std::string_view tag = "redis_version:";
  const auto at = info.find(tag);
  if (at == std::string::npos) return "?";
  const auto from = at + tag.size();
  return info.substr(from, info.find_first_of("\r\n", from) - from);
}

void print_table(const std::vector<result>& results, const std::string& where,
                 const settings& cfg) {
  std::printf("\n%s, %g s per run, median of %d pair%s\n\n", where.c_str(), cfg.seconds, cfg.repeat,
              cfg.repeat == 1 ? "" : "s");
  std::printf("%-9s %7s %14s %22s %7s %11s\n", "scenario", "callers", "dlock ops/s",
              "redis-benchmark ops/s", "ratio", "cmds/write");
  for (const auto& r : results) {
    std::printf("%-9s %7d %14.0f %22.0f %7.2f %11.2f\n", r.scenario.c_str(), r.callers, r.dlock,
                r.reference, r.ratio, r.commands_per_write);
  }
  std::printf(
      "\nratio = dlock / redis-benchmark (-c callers -P 1), median over pairs.\n"
      "cmds/write = commands per socket write on dlock's one connection (> 1: auto-pipelining).\n");
}

void print_json(const std::vector<result>& results) {
  nlohmann::json scenarios = nlohmann::json::array();
  for (const auto& r : results) {
    scenarios.push_back(
        {{"name", r.scenario},
         {"callers", r.callers},
         {"dlock", r.dlock},
         {"reference", r.reference},
         {"reference_name", "redis-benchmark -c " + std::to_string(r.callers) + " -P 1"},
         {"ratio", r.ratio},
         {"commands_per_write", r.commands_per_write}});
  }
  std::cout << nlohmann::json{{"scenarios", scenarios}}.dump(2) << '\n';
}

int run(const settings& cfg) {
  namespace emb = dlock::embedded;
  if (!emb::server_available(cfg.redis_benchmark)) {
    std::fprintf(stderr, "%s not found (Debian: apt-get install redis-tools)\n",
                 cfg.redis_benchmark.c_str());
    return exit_skip;
  }
  std::unique_ptr<emb::redis_server> embedded;
  std::string url = cfg.url;
  if (url.empty()) {
    if (!emb::server_available()) {
      std::fprintf(stderr, "redis-server not found; install it or pass --url\n");
      return exit_skip;
    }
    embedded = std::make_unique<emb::redis_server>();  // stopped by its destructor
    url = embedded->url();
  }
  const auto options = dlock::connection_options::from_url(url);
  const auto server = server_flags(options);

  // Declared after the server, so destroyed before it.
  dlock::redis_client control(url);
  const dlock::script s{std::string(bench_script)};
  // Loaded up front so both sides run pure EVALSHA (never NOSCRIPT + EVAL).
  const auto loaded = control.command({"SCRIPT", "LOAD", bench_script}).str();
  if (loaded != s.sha1()) throw std::runtime_error("SCRIPT LOAD returned " + loaded);
  const std::string where = options.redacted_url() + " (" + (embedded ? "embedded " : "") +
                            "redis-server " + server_version(control) + ")";
  std::fprintf(stderr, "%s\n", where.c_str());

  std::vector<scenario> scenarios;
  if (cfg.only.empty() || cfg.only == "ping") scenarios.push_back({scenario_kind::ping, "ping"});
  if (cfg.only.empty() || cfg.only == "evalsha") {
    scenarios.push_back({scenario_kind::evalsha, "evalsha"});
  }

  std::vector<result> results;
  for (const auto& sc : scenarios) {
    for (const int callers : cfg.callers) {
      results.push_back(measure(cfg, url, server, sc, s, callers));
    }
  }
  control.command({"DEL", bench_key});  // leave a shared (--url) server as we found it

  if (cfg.json) {
    print_json(results);
  } else {
    print_table(results, where, cfg);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  settings cfg;
  CLI::App app{
      "Throughput of dlock's multiplexed client (N caller threads, one connection) next to "
      "redis-benchmark -c N -P 1, against the same server."};
  app.add_option("--seconds", cfg.seconds, "Duration of each measurement")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--url", cfg.url, "Use this server instead of starting an embedded one");
  app.add_option("--repeat", cfg.repeat, "Pairs per scenario; medians are reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_flag("--json", cfg.json, "Print JSON instead of a table");
  app.add_option("--callers", cfg.callers, "Comma-separated caller-thread counts")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--only", cfg.only, "Run one scenario only")
      ->check(CLI::IsMember({"ping", "evalsha"}));
  app.add_option("--redis-benchmark", cfg.redis_benchmark, "The redis-benchmark program")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    return run(cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_client_bench: %s\n", e.what());
    return 1;
  }
}
