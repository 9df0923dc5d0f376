// dlock_paced_bench — what polling under load costs a client whose callers send at a fixed
// rate: the process's CPU per lock+unlock pair under each client_options::busy_poll_under_load.
//
// N threads share one dlock::client, each taking and releasing a lock of its own at a fixed
// pace (all due at the same instants, so their commands arrive in bursts and the client is
// loaded). The rate is the callers', whatever the mode, so the modes differ only in the CPU they
// spend to serve it. Each round runs the modes in turn, in a fresh client each; medians over the
// rounds are reported. docs/benchmarks.md (Tuning) has its figures.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <dlock/dlock.hpp>

#include "bench_support.hpp"
#include "embedded/redis_server.hpp"

namespace {

namespace bench = dlock::bench;
using clock_type = std::chrono::steady_clock;

struct settings {
  double seconds = 3;
  int threads = 16;
  int rate = 1'000;  // pairs/s per thread
  int rounds = 3;
  std::string url;
};

struct sample {
  double pairs_per_second = 0;
  double cpu_share = 0;  // of one core
};

sample measure(const settings& cfg, dlock::load_polling mode) {
  auto options = dlock::client_options::from_url(cfg.url);
  options.busy_poll_under_load = mode;
  dlock::client c(options);
  std::atomic<long> pairs{0};
  std::atomic<int> failures{0};
  const auto period = std::chrono::nanoseconds(1'000'000'000 / cfg.rate);
  const auto start = clock_type::now() + std::chrono::milliseconds(50);
  const auto end = start + std::chrono::duration_cast<clock_type::duration>(
                               std::chrono::duration<double>(cfg.seconds));
  const double cpu_before = bench::process_cpu_seconds();
  std::vector<std::thread> threads;
  for (int t = 0; t < cfg.threads; ++t) {
    threads.emplace_back([&, t] {
      auto lock = c.simple("dlock-bench:paced:" + std::to_string(t));
      for (auto due = start; due < end; due += period) {
        std::this_thread::sleep_until(due);
        auto held = lock.acquire();
        if (held && held.release()) {
          pairs.fetch_add(1, std::memory_order_relaxed);
        } else {
          failures.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  for (auto& t : threads)
    t.join();
  const double cpu = bench::process_cpu_seconds() - cpu_before;
  const std::chrono::duration<double> elapsed = clock_type::now() - start;
  if (failures.load() > 0) throw std::runtime_error("a lock on a private name was not granted");
  return {static_cast<double>(pairs.load()) / elapsed.count(), cpu / elapsed.count()};
}

int run(settings cfg) {
  namespace emb = dlock::embedded;
  std::unique_ptr<emb::redis_server> embedded;
  if (cfg.url.empty()) {
    if (!emb::server_available()) {
      std::fprintf(stderr, "redis-server not found; install it or pass --url\n");
      return bench::exit_skip;
    }
    embedded = std::make_unique<emb::redis_server>();  // stopped by its destructor
    cfg.url = embedded->url();
  }
  const auto& modes = bench::load_polling_names;
  std::map<std::string_view, std::vector<sample>> samples;
  for (int round = 0; round < cfg.rounds; ++round) {
    for (const auto& [name, mode] : modes) {
      samples[name].push_back(measure(cfg, mode));
      std::fprintf(stderr, "  [%d/%d] %-12.*s %8.0f pairs/s, CPU %5.1f %% of a core\n", round + 1,
                   cfg.rounds, static_cast<int>(name.size()), name.data(),
                   samples[name].back().pairs_per_second, 100 * samples[name].back().cpu_share);
    }
  }
  std::printf(
      "%d threads, each %d lock+unlock pairs/s (%d in all), %g s per run, %d rounds; "
      "medians\n",
      cfg.threads, cfg.rate, cfg.threads * cfg.rate, cfg.seconds, cfg.rounds);
  std::printf("%-20s %10s %14s %16s\n", "busy_poll_under_load", "pairs/s", "CPU (cores)",
              "CPU us per pair");
  for (const auto& [name, mode] : modes) {
    std::vector<double> rate, cpu, per_pair;
    for (const auto& s : samples[name]) {
      rate.push_back(s.pairs_per_second);
      cpu.push_back(s.cpu_share);
      per_pair.push_back(1e6 * s.cpu_share / s.pairs_per_second);
    }
    std::printf("%-20.*s %10.0f %14.2f %16.1f\n", static_cast<int>(name.size()), name.data(),
                bench::median(rate), bench::median(cpu), bench::median(per_pair));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  settings cfg;
  CLI::App app{
      "The CPU a client spends on callers that lock at a fixed rate, under each "
      "client_options::busy_poll_under_load."};
  app.add_option("--seconds", cfg.seconds, "Duration of each run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", cfg.threads, "Caller threads")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--rate", cfg.rate, "Lock+unlock pairs per second per thread")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  app.add_option("--rounds", cfg.rounds, "Runs of each mode; medians are reported")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--url", cfg.url, "Use this server instead of starting an embedded one");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_paced_bench: %s\n", e.what());
    return 1;
  }
}
