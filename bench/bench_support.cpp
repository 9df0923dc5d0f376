#include "bench_support.hpp"
#include <atomic>
#include <exception>
#include <future>
#include <latch>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <optional>
#include <stdexcept>
#include <system_error>

#include <dlock/lock.hpp>
#include <dlock/redis/client.hpp>
#include <nlohmann/json.hpp>

namespace dlock::bench {

using namespace std::chrono_literals;

// ---- child processes ----

process_output run_and_capture(const std::vector<std::string>& argv,
                               std::chrono::milliseconds timeout) {
  if (argv.empty()) throw std::invalid_argument("run_and_capture: empty argv");
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

// ---- redis-benchmark ----

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
    // "inf" means the run was too short for redis-benchmark's millisecond clock.
    if (ec == std::errc() && ptr == f.data() + f.size() && rps > 0 && std::isfinite(rps)) {
      return rps;
    }
  }
  throw std::runtime_error("no requests/second found in redis-benchmark output:\n" + output);
}

std::vector<std::string> server_flags(const connection_options& co) {
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

double run_redis_benchmark(const redis_benchmark_run& run) {
  std::vector<std::string> argv{run.program};
  argv.insert(argv.end(), run.server.begin(), run.server.end());
  argv.insert(argv.end(), {"-c", std::to_string(run.clients), "-n", std::to_string(run.requests),
                           "-P", std::to_string(run.pipeline), "--csv", "-q"});
  if (run.keyspace > 0) argv.insert(argv.end(), {"-r", std::to_string(run.keyspace)});
  if (run.command.empty()) {
    argv.insert(argv.end(), {"-t", run.tests});
  } else {
    argv.insert(argv.end(), run.command.begin(), run.command.end());
  }
  const auto out = run_and_capture(argv, run.timeout);
  if (!WIFEXITED(out.status) || WEXITSTATUS(out.status) != 0) {
    throw std::runtime_error(run.program + " failed (status " + std::to_string(out.status) +
                             "):\n" + out.text);
  }
  // Redis 7's redis-benchmark exits 1 on an error reply; older ones print it and go on, and a
  // script error must not pass for a fast run.
  if (out.text.find("Error from server") != std::string::npos) {
    throw std::runtime_error(run.program + " got error replies:\n" + out.text);
  }
  return parse_rps(out.text);
}

std::int64_t requests_for(double rate, double seconds, int clients, int pipeline) {
  const auto floor = std::max<std::int64_t>(2000, std::int64_t{clients} * pipeline * 20);
  if (!(rate > 0) || !std::isfinite(rate)) return floor;
  return std::max(floor, static_cast<std::int64_t>(rate * seconds));
}

// ---- the server ----

std::string server_version(redis_client& r) {
  const auto info = r.command({"INFO", "server"}).str();
  const std::string_view tag = "redis_version:";
  const auto at = info.find(tag);
  if (at == std::string::npos) return "?";
  const auto from = at + tag.size();
  return info.substr(from, info.find_first_of("\r\n", from) - from);
}

std::map<std::string, std::uint64_t> command_calls(redis_client& r) {
  // Lines look like "cmdstat_evalsha:calls=12,usec=34,usec_per_call=2.83,...".
  const auto info = r.command({"INFO", "commandstats"}).str();
  std::map<std::string, std::uint64_t> calls;
  std::size_t start = 0;
  while (start < info.size()) {
    const auto end = std::min(info.find_first_of("\r\n", start), info.size());
    const std::string_view line = std::string_view(info).substr(start, end - start);
    start = end + 1;
    constexpr std::string_view prefix = "cmdstat_";
    constexpr std::string_view field = ":calls=";
    if (line.substr(0, prefix.size()) != prefix) continue;
    const auto colon = line.find(field);
    if (colon == std::string_view::npos) continue;
    const auto name = line.substr(prefix.size(), colon - prefix.size());
    const auto digits = line.substr(colon + field.size());
    std::uint64_t n = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), n);
    calls[std::string(name)] = n;
  }
  return calls;
}

std::uint64_t delete_matching(redis_client& r, const std::vector<std::string>& patterns) {
  std::uint64_t deleted = 0;
  for (const auto& pattern : patterns) {
    std::string cursor = "0";
    do {
      const auto page = r.command({"SCAN", cursor, "MATCH", pattern, "COUNT", "10000"});
      cursor = page.at(0).str();
      const auto& keys = page.at(1).elements();
      if (keys.empty()) continue;
      std::vector<std::string> unlink{"UNLINK"};
      unlink.reserve(keys.size() + 1);
      for (const auto& k : keys)
        unlink.push_back(k.str());
      deleted += static_cast<std::uint64_t>(r.command(unlink).integer());
    } while (cursor != "0");
  }
  return deleted;
}

// ---- statistics ----

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double ratio_of(double a, double b) {
  return b != 0 ? a / b : 0;
}

double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// ---- output ----

std::string text_table::render() const {
  std::vector<std::size_t> width(header.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    if (row.size() > width.size()) width.resize(row.size(), 0);
    for (std::size_t i = 0; i < row.size(); ++i)
      width[i] = std::max(width[i], row[i].size());
  };
  widen(header);
  for (const auto& row : rows)
    widen(row);
  std::string out;
  auto line = [&](const std::vector<std::string>& row) {
    std::string text;
    for (std::size_t i = 0; i < width.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      const std::string pad(width[i] - cell.size(), ' ');
      if (i > 0) text += "  ";
      const bool left = i < align.size() ? align[i] == 'l' : i == 0;
      text += left ? cell + pad : pad + cell;
    }
    while (!text.empty() && text.back() == ' ')
      text.pop_back();
    out += text + '\n';
  };
  line(header);
  for (const auto& row : rows)
    line(row);
  return out;
}

std::string scenarios_json(const nlohmann::json& scenarios) {
  return nlohmann::json{{"scenarios", scenarios}}.dump(2);
}

std::string scenarios_json(const nlohmann::ordered_json& scenarios) {
  return nlohmann::ordered_json{{"scenarios", scenarios}}.dump(2);
}

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

// ---- timed multi-threaded loops ----

double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

timed_run run_timed(int threads, double seconds, const std::function<void(int)>& step,
                    const std::function<void()>& at_start, const std::function<void()>& at_end) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> total{0};
  std::latch ready(threads);
  std::latch go(1);
  bool released = false;
  const auto release = [&] {
    if (!released) go.count_down();
    released = true;
  };
  std::mutex failure_mutex;
  std::exception_ptr failure;

  timed_run run;
  {
    std::vector<std::jthread> pool;
    pool.reserve(static_cast<std::size_t>(threads));
    try {
      for (int i = 0; i < threads; ++i) {
        pool.emplace_back([&, i] {
          std::uint64_t n = 0;
          bool counted = false;
          try {
            step(i);
            ready.count_down();
            counted = true;
            go.wait();
            while (!stop.load(std::memory_order_relaxed)) {
              step(i);
              ++n;
            }
          } catch (...) {
            {
              const std::lock_guard lock(failure_mutex);
              if (!failure) failure = std::current_exception();
            }
            stop = true;
            if (!counted) ready.count_down();
          }
          total += n;
        });
      }
      ready.wait();
      if (at_start && !stop) at_start();
    } catch (...) {
      stop = true;
      release();
      throw;  // the pool's destructor joins
    }
    run.started = clock_type::now();
    release();
    const auto until = run.started + std::chrono::duration_cast<clock_type::duration>(
                                         std::chrono::duration<double>(seconds));
    while (!stop.load() && clock_type::now() < until) {
      std::this_thread::sleep_for(std::min<clock_type::duration>(until - clock_type::now(), 50ms));
    }
    run.stopped = clock_type::now();
    stop = true;
  }  // joins
  run.joined = clock_type::now();
  if (failure) std::rethrow_exception(failure);
  if (at_end) at_end();
  run.steps = total.load();
  return run;
}

timed_run run_async_chains(std::vector<simple_lock>& locks, int chains, double seconds,
                           const lease_options& lo) {
  if (chains <= 0 || static_cast<std::size_t>(chains) > locks.size()) {
    throw std::invalid_argument("run_async_chains: as many locks as chains are needed");
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> pairs{0};
  std::atomic<int> live{chains};
  std::atomic<bool> failed{false};
  std::promise<void> all_done;
  const auto chain_ended = [&] {
    if (live.fetch_sub(1) == 1) all_done.set_value();
  };
  std::function<void(int)> step = [&](int i) {
    if (stop.load(std::memory_order_relaxed)) return chain_ended();
    locks[static_cast<std::size_t>(i)].acquire_async(
        std::chrono::seconds(10),
        [&, i](acquire_result r) {
          lease l = std::move(r.held);
          if (r.error || !l) {
            failed = true;
            stop = true;
            return chain_ended();
          }
          l.release_async();
          pairs.fetch_add(1, std::memory_order_relaxed);
          step(i);
        },
        lo);
  };
  timed_run run;
  run.started = clock_type::now();
  for (int i = 0; i < chains; ++i)
    step(i);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  run.stopped = clock_type::now();
  stop = true;
  all_done.get_future().wait();
  run.joined = clock_type::now();
  run.steps = pairs.load();
  if (failed) throw std::runtime_error("an asynchronous lock chain failed");
  return run;
}

std::string throughput_load::label() const {
  return format("%3d %s", count, async ? "async chains" : "threads");
}

std::string throughput_load::row_suffix() const {
  return (async ? "async=" : "threads=") + std::to_string(count);
}

const char* throughput_load::count_field() const {
  return async ? "async_chains" : "threads";
}

const char* throughput_load::how() const {
  return async ? "one client, N chains of acquire_async + release_async from completion "
                 "callbacks, distinct keys"
               : "one client, N threads (acquire + release_async), distinct keys";
}

std::vector<throughput_load> throughput_loads(const std::vector<int>& threads,
                                              const std::vector<int>& async_chains) {
  std::vector<throughput_load> out;
  for (const int n : threads)
    out.push_back({n, false});
  for (const int n : async_chains)
    out.push_back({n, true});
  return out;
}

timed_run run_throughput_load(std::vector<simple_lock>& locks, const throughput_load& load,
                              double seconds, const lease_options& lo, const char* what,
                              const std::function<void()>& at_start,
                              const std::function<void()>& at_end) {
  if (load.count <= 0 || static_cast<std::size_t>(load.count) > locks.size()) {
    throw std::invalid_argument("run_throughput_load: as many locks as threads or chains needed");
  }
  if (load.async) {
    if (at_start) at_start();
    auto run = run_async_chains(locks, load.count, seconds, lo);
    if (at_end) at_end();
    return run;
  }
  return run_timed(
      load.count, seconds,
      [&](int i) {
        auto& lock = locks[static_cast<std::size_t>(i)];
        auto l = load.try_acquire ? lock.try_acquire(lo) : lock.acquire(lo);
        if (!l) throw std::runtime_error(std::string(what) + ": a private lock was not granted");
        l.release_async();
      },
      at_start, at_end);
}

}  // namespace dlock::bench
