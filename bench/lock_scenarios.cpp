#include "lock_scenarios.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <exception>
#include <future>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <stdexcept>
#include <thread>
#include <utility>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"
#include "dlock_lua_scripts.hpp"
#include "rb_keys.hpp"

namespace dlock::bench {

client_options with_client_knobs(const bench_settings& s, client_options o) {
  if (s.command_connections != 0) o.command_connections = s.command_connections;
  if (s.busy_poll_us >= 0) o.busy_poll = std::chrono::microseconds(s.busy_poll_us);
  o.busy_poll_under_load = s.busy_poll_under_load;
  return o;
}

void report(const bench_settings& s, const std::string& line) {
  if (s.progress) s.progress(line);
}

namespace {

using namespace std::chrono_literals;

// Every key the scenarios write, and the keys dlock derives from lock names (dlock/keys.hpp).
const std::vector<std::string> bench_key_patterns{"dlock-bench:*",
                                                  keys_of_lock("dlock-bench:*").fence_counter,
                                                  keys_of_lock("dlock-bench:*").unlock_channel};

int rounds_of(const bench_settings& s) {
  return std::max(1, s.rounds);
}

void check_settings(const bench_settings& s) {
  if (s.url.empty()) throw std::invalid_argument("bench_settings::url is empty");
  if (!(s.seconds > 0)) throw std::invalid_argument("bench_settings::seconds must be positive");
}

client_options client_options_of(const bench_settings& s) {
  return with_client_knobs(s, client_options::from_url(s.url));
}

// Commands that clients issue to take and release locks. Script-internal calls show up in
// INFO commandstats under their own names (set, incr, publish, ...), so they are not summed.
const std::vector<std::string> lock_commands{"evalsha",     "eval",       "subscribe",
                                             "unsubscribe", "psubscribe", "punsubscribe"};

const std::vector<std::string> pubsub_commands{"subscribe", "unsubscribe", "psubscribe",
                                               "punsubscribe"};

std::uint64_t calls_delta(const std::map<std::string, std::uint64_t>& before,
                          const std::map<std::string, std::uint64_t>& after,
                          const std::vector<std::string>& names) {
  std::uint64_t total = 0;
  for (const auto& n : names) {
    const auto a = after.find(n);
    if (a == after.end()) continue;
    const auto b = before.find(n);
    total += a->second - (b == before.end() ? 0 : b->second);
  }
  return total;
}

std::string hex_token(std::mt19937_64& rng) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string t(32, '0');
  for (int half = 0; half < 2; ++half) {
    auto v = rng();
    for (int i = 0; i < 16; ++i) {
      t[static_cast<std::size_t>(half * 16 + i)] = digits[v & 0xf];
      v >>= 4;
    }
  }
  return t;
}

lease_options fixed_lease(std::chrono::milliseconds lease_time) {
  lease_options lo;
  lo.lease_time = lease_time;
  return lo;
}

// A variant measured in interleaved slices: totals accumulate over the slices.
struct slice_totals {
  std::uint64_t steps = 0;
  double seconds = 0;
  std::uint64_t commands = 0;
  double rate() const { return seconds > 0 ? static_cast<double>(steps) / seconds : 0; }
  double per_step(std::uint64_t n) const {
    return steps > 0 ? static_cast<double>(n) / static_cast<double>(steps) : 0;
  }
};

constexpr std::string_view compare_and_delete =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
    "return 0";

double micros_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

}  // namespace

const std::vector<double>& distribution_percentiles() {
  static const std::vector<double> points{1,  2.5, 5,  10, 15,   20,   25,   30,    35,   40,
                                          45, 50,  55, 60, 65,   70,   75,   80,    85,   90,
                                          95, 97,  98, 99, 99.5, 99.8, 99.9, 99.95, 99.99};
  return points;
}

distribution summarize(std::vector<double> samples) {
  distribution d;
  d.samples = samples.size();
  if (samples.empty()) return d;
  std::sort(samples.begin(), samples.end());
  for (const double p : distribution_percentiles()) {
    // Nearest rank, as percentile() in bench_support.
    const auto rank =
        static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(samples.size())));
    d.values.push_back(samples[std::min(samples.size() - 1, rank == 0 ? 0 : rank - 1)]);
  }
  return d;
}

// =============================================================================================
// 1. uncontended

std::vector<scenario_result> run_uncontended(const bench_settings& s,
                                             const uncontended_options& o) {
  check_settings(s);
  redis_client control(s.url);
  delete_matching(control, bench_key_patterns);

  client c(client_options_of(s));
  auto& redis = c.redis();
  const auto lo = fixed_lease(o.lease);
  auto reentrant = c.reentrant("dlock-bench:uc:reentrant");
  auto simple = c.simple("dlock-bench:uc:simple");
  const script cad{std::string(compare_and_delete)};
  const std::string raw_key = "dlock-bench:uc:raw";
  const std::string lease_ms = std::to_string(o.lease.count());
  std::mt19937_64 rng(std::random_device{}());

  const auto held_and_released = [](lease l, const char* what) {
    if (!l) throw std::runtime_error(std::string(what) + ": an uncontended lock was not granted");
    if (!l.release()) throw std::runtime_error(std::string(what) + ": release failed");
  };

  struct variant {
    std::string name;
    std::function<void()> pair;
    std::vector<std::string> commands;      // client-issued commands to count
    slice_totals totals;                    // the timed batches of every round
    std::vector<double> latencies_us = {};  // one per timed pair
    double commands_per_pair = 0;           // of `commands`, counted apart
    double pubsub_per_pair = 0;
  };
  std::vector<variant> variants;
  variants.push_back({"reentrant",
                      [&] { held_and_released(reentrant.acquire(lo), "reentrant"); },
                      lock_commands,
                      {}});
  variants.push_back(
      {"simple", [&] { held_and_released(simple.acquire(lo), "simple"); }, lock_commands, {}});
  variants.push_back({"simple.try_acquire",
                      [&] { held_and_released(simple.try_acquire(lo), "simple.try_acquire"); },
                      lock_commands,
                      {}});
  variants.push_back({"ping",
                      [&] {
                        redis.command({"PING"});
                        redis.command({"PING"});
                      },
                      {"ping"},
                      {}});
  variants.push_back(
      {"raw",
       [&] {
         const std::string token = hex_token(rng);
         const auto set = redis.command({"SET", raw_key, token, "NX", "PX", lease_ms});
         if (set.is_nil()) throw std::runtime_error("raw: SET NX found the key");
         const std::array<std::string_view, 1> keys{raw_key};
         const std::array<std::string_view, 1> args{token};
         if (redis.eval(cad, keys, args).integer() != 1) {
           throw std::runtime_error("raw: compare-and-delete deleted nothing");
         }
       },
       {"set", "evalsha", "eval"},
       {}});

  // The simple lock's own two scripts sent by hand through the same client: the lock's server
  // work with none of its client work, so that the lock's ratio to it is what the library adds.
  const script acquire_script{std::string(lua::simple_acquire)};
  const script release_script{std::string(lua::simple_release)};
  const auto script_keys = keys_of_lock("dlock-bench:uc:scripts");
  variants.push_back(
      {"scripts",
       [&] {
         const std::string token = hex_token(rng);
         const std::array<std::string_view, 2> acquire_keys{script_keys.lock,
                                                            script_keys.fence_counter};
         const std::array<std::string_view, 2> acquire_args{token, lease_ms};
         if (redis.eval(acquire_script, acquire_keys, acquire_args).at(0).integer() != 1) {
           throw std::runtime_error("scripts: the acquire script found the lock held");
         }
         const std::array<std::string_view, 2> release_keys{script_keys.lock,
                                                            script_keys.unlock_channel};
         const std::array<std::string_view, 3> release_args{token, "0", "publish"};
         if (!redis.eval(release_script, release_keys, release_args).is_integer()) {
           throw std::runtime_error("scripts: the release script released nothing");
         }
       },
       {"evalsha", "eval"},
       {}});

  for (auto& v : variants)
    v.latencies_us.reserve(1 << 16);

  // The variants take turns in batches of a few milliseconds, each timed by its own batches: on
  // two shared vCPUs one loop's rate swings by up to 2x from one second to the next, so
  // variants timed in slices of their own compared machine states as
  // much as code. The first pass of each round warms every variant up and is not timed; the
  // second times one batch of each whatever the clock says, so that no variant ends a round
  // without a sample (a loaded machine under TSan spent a whole 0.2 s round warming up, and
  // two rows came out empty).
  constexpr int batch_pairs = 64;
  const int rounds = rounds_of(s);
  const auto round_length = std::chrono::duration<double>(s.seconds / rounds * variants.size());
  for (int round = 0; round < rounds; ++round) {
    std::vector<slice_totals> in_round(variants.size());
    const auto round_end = clock_type::now() + round_length;
    for (std::size_t turn = 0;; ++turn) {
      const bool warm_up = turn < variants.size();
      if (turn >= 2 * variants.size() && clock_type::now() >= round_end) break;
      auto& v = variants[(turn + static_cast<std::size_t>(round)) % variants.size()];
      auto& totals = in_round[static_cast<std::size_t>(&v - variants.data())];
      const auto t0 = clock_type::now();
      for (int i = 0; i < batch_pairs; ++i) {
        const auto p0 = clock_type::now();
        v.pair();
        if (!warm_up) v.latencies_us.push_back(micros_since(p0));
      }
      if (warm_up) continue;
      totals.steps += batch_pairs;
      totals.seconds += std::chrono::duration<double>(clock_type::now() - t0).count();
    }
    for (std::size_t k = 0; k < variants.size(); ++k) {
      variants[k].totals.steps += in_round[k].steps;
      variants[k].totals.seconds += in_round[k].seconds;
      report(s, format("uncontended round %d/%d  %-18s %10.0f pairs/s", round + 1, rounds,
                       variants[k].name.c_str(), in_round[k].rate()));
    }
  }
  // Commands per pair, counted apart from the timed rounds (the server's counters are read
  // before and after, which the batches are too short to afford); each variant's pairs send the
  // same commands every time.
  constexpr int counted_pairs = 1000;
  for (auto& v : variants) {
    const auto before = command_calls(control);
    for (int i = 0; i < counted_pairs; ++i)
      v.pair();
    const auto after = command_calls(control);
    v.commands_per_pair =
        static_cast<double>(calls_delta(before, after, v.commands)) / counted_pairs;
    v.pubsub_per_pair =
        static_cast<double>(calls_delta(before, after, pubsub_commands)) / counted_pairs;
  }
  // Allocations per pair, counted apart from the timed rounds: the count is exact where the
  // rates are noisy. The pairs before it let pools and caches settle.
  std::vector<double> allocations(variants.size(), -1);
  if (s.allocations) {
    constexpr int settle = 200, counted = 2000;
    for (std::size_t k = 0; k < variants.size(); ++k) {
      for (int i = 0; i < settle; ++i)
        variants[k].pair();
      s.allocations.start();
      for (int i = 0; i < counted; ++i)
        variants[k].pair();
      allocations[k] = static_cast<double>(s.allocations.stop()) / counted;
    }
  }
  if (s.client_metrics) s.client_metrics("uncontended", c.metrics());
  delete_matching(control, bench_key_patterns);
  const auto add_allocations = [&](scenario_result& r, const char* field, std::size_t k) {
    if (allocations[k] >= 0) r.add_extra(field, allocations[k]);
  };

  const auto& ping = variants[3].totals;
  const auto& raw = variants[4].totals;
  const auto& scripts = variants[5].totals;
  const auto ping_latency = summarize(std::move(variants[3].latencies_us));
  const auto raw_latency = summarize(std::move(variants[4].latencies_us));
  const auto scripts_latency = summarize(std::move(variants[5].latencies_us));
  const double rtt_us = ping.rate() > 0 ? 1e6 / (2 * ping.rate()) : 0;
  std::vector<scenario_result> results;
  for (std::size_t i = 0; i < 3; ++i) {
    auto& v = variants[i];
    const double d = v.totals.rate();
    const auto latency = summarize(std::move(v.latencies_us));
    const auto add_common = [&](scenario_result& r) {
      r.add_extra("pair_latency_us", d > 0 ? 1e6 / d : 0);
      r.add_extra("round_trips_per_pair", ratio_of(2 * ping.rate(), d));
      r.add_extra("commands_per_pair", v.commands_per_pair);
      r.add_extra("subscribe_unsubscribe_per_pair", v.pubsub_per_pair);
      r.add_extra("ping_rtt_us", rtt_us);
      add_allocations(r, "allocations_per_pair", i);
    };
    scenario_result vs_raw{"uncontended." + v.name,
                           "pairs/s",
                           d,
                           raw.rate(),
                           "raw SET NX PX + compare-and-delete",
                           ratio_of(d, raw.rate()),
                           v.name == "simple.try_acquire" ? "" : ">= 0.95 x raw",
                           {}};
    add_common(vs_raw);
    vs_raw.add_extra("reference_commands_per_pair", variants[4].commands_per_pair);
    add_allocations(vs_raw, "reference_allocations_per_pair", 4);
    vs_raw.dlock_latency_us = latency;
    vs_raw.reference_latency_us = raw_latency;
    results.push_back(std::move(vs_raw));
    scenario_result vs_ping{"uncontended." + v.name,
                            "pairs/s",
                            d,
                            ping.rate(),
                            "2 x PING",
                            ratio_of(d, ping.rate()),
                            v.name == "simple.try_acquire" ? "" : "2 round trips (ratio ~1)",
                            {}};
    add_common(vs_ping);
    add_allocations(vs_ping, "reference_allocations_per_pair", 3);
    vs_ping.dlock_latency_us = latency;
    vs_ping.reference_latency_us = ping_latency;
    results.push_back(std::move(vs_ping));
    if (v.name != "simple") continue;
    scenario_result vs_scripts{"uncontended.simple",
                               "pairs/s",
                               d,
                               scripts.rate(),
                               "its scripts by hand (same client)",
                               ratio_of(d, scripts.rate()),
                               "",
                               {}};
    add_common(vs_scripts);
    vs_scripts.add_extra("reference_commands_per_pair", variants[5].commands_per_pair);
    add_allocations(vs_scripts, "reference_allocations_per_pair", 5);
    vs_scripts.dlock_latency_us = latency;
    vs_scripts.reference_latency_us = scripts_latency;
    results.push_back(std::move(vs_scripts));
  }
  return results;
}

// =============================================================================================
// 2. throughput

namespace {

struct rb_context {
  const bench_settings& s;
  redis_client& control;
  std::vector<std::string> server;
  std::string acquire_sha;
  std::string release_sha;
  std::string lease_ms;
  script populate{std::string(rb::populate_range)};
  script unpopulate{std::string(rb::delete_range)};
};

struct rb_pair {
  double acquire_rps = 0;
  double release_rps = 0;
  double release_hit_fraction = 0;  // releases that found their key (the real release path)
  double pairs() const { return 1.0 / (1.0 / acquire_rps + 1.0 / release_rps); }
};

using rb::populate_chunk;

void for_chunks(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& f) {
  for (std::int64_t from = 0; from < n; from += populate_chunk) {
    f(from, std::min(n, from + populate_chunk));
  }
}

// One redis-benchmark pair (acquire run, then release run), each about `seconds` / 2 long at the
// estimated rate `estimate` (requests/s; updated with what was measured).
rb_pair run_rb_pair(rb_context& ctx, int clients, int pipeline, double seconds, double& estimate) {
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::duration<double>(60 + seconds * 20));
  redis_benchmark_run run;
  run.program = ctx.s.redis_benchmark;
  run.server = ctx.server;
  run.clients = clients;
  run.pipeline = pipeline;
  run.timeout = timeout;
  rb_pair out;

  // Acquire: fresh keys (2e9 of them: repeats are rare), so the script takes its grant path:
  // SET NX PX + INCR of the fencing counter.
  run.requests = requests_for(estimate, seconds / 2, clients, pipeline);
  run.keyspace = 2'000'000'000;
  run.command = {"evalsha",
                 ctx.acquire_sha,
                 "2",
                 std::string(rb::acquire_prefix) + "__rand_int__",
                 keys_of_lock("dlock-bench:rb").fence_counter,
                 std::string(rb::token),
                 ctx.lease_ms};
  out.acquire_rps = run_redis_benchmark(run);
  delete_matching(ctx.control, {std::string(rb::acquire_prefix) + "*"});

  // Release: keys pre-set to the token it sends, so most calls take the real release path
  // (TYPE, GET, DEL, PUBLISH) rather than the cheap "not held" one.
  run.requests = requests_for(out.acquire_rps, seconds / 2, clients, pipeline);
  const std::int64_t keys = std::min<std::int64_t>(3 * run.requests, 2'000'000'000);
  const std::string prefix(rb::release_prefix);
  for_chunks(keys, [&](std::int64_t from, std::int64_t to) {
    const std::string a = std::to_string(from), b = std::to_string(to);
    const std::array<std::string_view, 5> args{a, b, prefix, rb::token, "600000"};
    ctx.control.eval(ctx.populate, std::span<const std::string_view>(), args);
  });
  run.keyspace = keys;
  run.command = {"evalsha",
                 ctx.release_sha,
                 "2",
                 prefix + "__rand_int__",
                 keys_of_lock("dlock-bench:rb").unlock_channel,
                 std::string(rb::token),
                 "0",
                 "publish"};
  out.release_rps = run_redis_benchmark(run);
  std::int64_t left = 0;
  for_chunks(keys, [&](std::int64_t from, std::int64_t to) {
    const std::string a = std::to_string(from), b = std::to_string(to);
    const std::array<std::string_view, 3> args{a, b, prefix};
    left += ctx.control.eval(ctx.unpopulate, std::span<const std::string_view>(), args).integer();
  });
  out.release_hit_fraction = static_cast<double>(keys - left) /
                             static_cast<double>(std::max<std::int64_t>(1, run.requests));
  estimate = 2 * out.pairs();
  return out;
}

}  // namespace

std::vector<scenario_result> run_throughput(const bench_settings& s, const throughput_options& o) {
  check_settings(s);
  redis_client control(s.url);
  delete_matching(control, bench_key_patterns);

  rb_context ctx{s, control, server_flags(control.options()), "", "", ""};
  const script acquire_script{std::string(lua::simple_acquire)};
  const script release_script{std::string(lua::simple_release)};
  // Loaded up front so redis-benchmark runs pure EVALSHA.
  ctx.acquire_sha = control.command({"SCRIPT", "LOAD", lua::simple_acquire}).str();
  ctx.release_sha = control.command({"SCRIPT", "LOAD", lua::simple_release}).str();
  if (ctx.acquire_sha != acquire_script.sha1() || ctx.release_sha != release_script.sha1()) {
    throw std::runtime_error("SCRIPT LOAD returned an unexpected SHA1");
  }
  ctx.lease_ms = std::to_string(o.lease.count());

  client c(client_options_of(s));
  const auto lo = fixed_lease(o.lease);
  int max_threads = o.threads.empty() ? 0 : *std::max_element(o.threads.begin(), o.threads.end());
  for (int chains : o.async_chains)
    max_threads = std::max(max_threads, chains);
  std::vector<simple_lock> locks;
  for (int i = 0; i < max_threads; ++i) {
    locks.push_back(c.simple("dlock-bench:tp:" + std::to_string(i)));
  }

  const std::string ceiling_name = "redis-benchmark -c " + std::to_string(o.ceiling_clients) +
                                   " -P " + std::to_string(o.ceiling_pipeline) + " (ceiling)";
  const int rounds = rounds_of(s);
  const double slice = s.seconds / rounds;
  double ceiling_estimate = 0;  // requests/s; 0: redis-benchmark sizes its first run minimally
  std::vector<rb_pair> all_ceiling;
  std::vector<scenario_result> results;
  for (std::size_t t = 0; t < o.threads.size(); ++t) {
    const int threads = o.threads[t];
    slice_totals ours;
    std::uint64_t commands_sent = 0, writes = 0, pubsub = 0;
    std::vector<rb_pair> same, ceiling;
    double same_estimate = 0;
    const auto run_ours = [&] {
      std::map<std::string, std::uint64_t> before, after;
      client_counters cb{}, ca{};
      const auto run = run_throughput_load(
          locks, {threads, false, o.try_acquire}, slice, lo, "throughput",
          [&] {
            before = command_calls(control);
            cb = c.redis().counters();
          },
          [&] {
            after = command_calls(control);
            ca = c.redis().counters();
          });
      ours.steps += run.steps;
      ours.seconds += seconds_between(run.started, run.joined);
      ours.commands += calls_delta(before, after, lock_commands);
      pubsub += calls_delta(before, after, pubsub_commands);
      commands_sent += ca.commands_sent - cb.commands_sent;
      writes += ca.writes - cb.writes;
      if (same_estimate == 0) same_estimate = 2 * run.rate();
      report(s, format("throughput %3d threads: dlock %10.0f pairs/s", threads, run.rate()));
    };
    const auto run_same = [&] {
      if (same_estimate == 0) same_estimate = ceiling_estimate / 2;
      same.push_back(run_rb_pair(ctx, threads, 1, slice, same_estimate));
      report(s, format("throughput %3d threads: redis-benchmark -c %d -P 1 %10.0f pairs/s", threads,
                       threads, same.back().pairs()));
    };
    const auto run_ceiling = [&] {
      ceiling.push_back(
          run_rb_pair(ctx, o.ceiling_clients, o.ceiling_pipeline, slice, ceiling_estimate));
      report(s, format("throughput %3d threads: %s %10.0f pairs/s", threads, ceiling_name.c_str(),
                       ceiling.back().pairs()));
    };
    const std::array<std::function<void()>, 3> order{run_ours, run_same, run_ceiling};
    for (int round = 0; round < rounds; ++round) {
      // Rotate the order per round (and per thread count), ours first in the very first round
      // so its rate sizes redis-benchmark's first run.
      const auto shift = static_cast<std::size_t>(round) + t;
      for (std::size_t k = 0; k < order.size(); ++k)
        order[(k + shift) % order.size()]();
    }

    // Totals over the slices: each pair of runs lasted about as long as one of our slices.
    const auto combine = [](const std::vector<rb_pair>& v, double rb_pair::*field) {
      std::vector<double> x;
      for (const auto& p : v)
        x.push_back(p.*field);
      return median(x);
    };
    const auto pairs_of = [](const std::vector<rb_pair>& v) {
      std::vector<double> x;
      for (const auto& p : v)
        x.push_back(p.pairs());
      return median(x);
    };
    const double d = ours.rate();
    const std::string name = std::string(o.try_acquire ? "throughput.try_acquire" : "throughput") +
                             ".threads=" + std::to_string(threads);
    const auto add_common = [&](scenario_result& r, const std::vector<rb_pair>& ref) {
      r.add_extra("threads", static_cast<double>(threads));
      r.add_extra("command_connections", static_cast<double>(c.options().command_connections));
      r.add_extra("dlock_commands_per_pair", ours.per_step(ours.commands));
      r.add_extra("dlock_subscribe_unsubscribe_per_pair", ours.per_step(pubsub));
      r.add_extra(
          "dlock_commands_per_write",
          writes > 0 ? static_cast<double>(commands_sent) / static_cast<double>(writes) : 0);
      r.add_extra("rb_acquire_rps", combine(ref, &rb_pair::acquire_rps));
      r.add_extra("rb_release_rps", combine(ref, &rb_pair::release_rps));
      r.add_extra("rb_release_hit_fraction", combine(ref, &rb_pair::release_hit_fraction));
      r.add_extra("rb_pairs_note",
                  "redis-benchmark pairs/s = 1/(1/acquire rps + 1/release rps) = its requests/s "
                  "over both runs / 2; median over rounds");
    };
    const double same_pairs = pairs_of(same);
    scenario_result vs_same{name,
                            "pairs/s",
                            d,
                            same_pairs,
                            "redis-benchmark -c " + std::to_string(threads) + " -P 1",
                            ratio_of(d, same_pairs),
                            "",
                            {}};
    add_common(vs_same, same);
    results.push_back(std::move(vs_same));
    const double ceiling_pairs = pairs_of(ceiling);
    scenario_result vs_ceiling{
        name,
        "pairs/s",
        d,
        ceiling_pairs,
        ceiling_name,
        ratio_of(d, ceiling_pairs),
        threads >= 16 ? ">= 0.5 x ceiling; >= 2 x best peer at 16 (peers ~29k-34k pairs/s)" : "",
        {}};
    add_common(vs_ceiling, ceiling);
    results.push_back(std::move(vs_ceiling));
    all_ceiling.insert(all_ceiling.end(), ceiling.begin(), ceiling.end());
  }

  for (const int chains : o.async_chains) {
    std::vector<double> rates;
    for (int round = 0; round < rounds; ++round) {
      rates.push_back(run_async_chains(locks, chains, slice, lo).rate());
      report(s, format("throughput %3d async chains: dlock %10.0f pairs/s", chains, rates.back()));
      // The ceiling, interleaved as for the threads, unless the thread runs measured it enough.
      if (all_ceiling.size() < static_cast<std::size_t>(rounds)) {
        all_ceiling.push_back(
            run_rb_pair(ctx, o.ceiling_clients, o.ceiling_pipeline, slice, ceiling_estimate));
      }
    }
    std::vector<double> ceiling_pairs;
    for (const auto& p : all_ceiling)
      ceiling_pairs.push_back(p.pairs());
    const double d = median(rates);
    const double ref = median(ceiling_pairs);
    scenario_result r{"throughput.async=" + std::to_string(chains),
                      "pairs/s",
                      d,
                      ref,
                      ceiling_name,
                      ratio_of(d, ref),
                      ">= 0.5 x ceiling; >= 2 x best peer (peers ~29k-34k pairs/s)",
                      {}};
    r.add_extra("async_chains", static_cast<double>(chains));
    r.add_extra("command_connections", static_cast<double>(c.options().command_connections));
    r.add_extra("how", "acquire_async + release_async from completion callbacks, one client");
    results.push_back(std::move(r));
  }
  if (s.client_metrics) s.client_metrics("throughput", c.metrics());
  delete_matching(control, bench_key_patterns);
  return results;
}

// =============================================================================================
// 3. handoff

namespace {

struct hold_event {
  clock_type::time_point acquired;        // acquire() returned
  clock_type::time_point release_called;  // release() called
  clock_type::time_point released;        // release() returned
  int worker = 0;
};

struct handoff_totals {
  std::uint64_t acquisitions = 0;      // inside the windows
  std::uint64_t handoffs = 0;          // inside the windows
  std::uint64_t all_acquisitions = 0;  // from window start to join (for commands/acquisition)
  std::uint64_t commands = 0;
  std::uint64_t pubsub_commands = 0;  // the part of `commands` that is [p]subscribe/[p]unsubscribe
  std::uint64_t negative_latencies = 0;  // next holder returned before the releaser did
  double seconds = 0;
  std::vector<double> latencies_us;  // release() returned → next holder's acquire() returned
  std::vector<double> from_call_us;  // release() called → next holder's acquire() returned
  double acquisitions_per_s() const { return ratio_of(static_cast<double>(acquisitions), seconds); }
  double handoffs_per_s() const { return ratio_of(static_cast<double>(handoffs), seconds); }
  double commands_per_acquisition() const {
    return ratio_of(static_cast<double>(commands), static_cast<double>(all_acquisitions));
  }
};

void tally(handoff_totals& t, std::vector<std::vector<hold_event>>& logs, const timed_run& run) {
  std::vector<hold_event> all;
  for (auto& l : logs) {
    all.insert(all.end(), l.begin(), l.end());
    l.clear();
  }
  // The lock orders its holders, and each holder's acquire() returns before it releases, which
  // is before the next grant: sorting by return time recovers the order of grants.
  std::sort(all.begin(), all.end(),
            [](const hold_event& a, const hold_event& b) { return a.acquired < b.acquired; });
  t.all_acquisitions += all.size();
  t.seconds += run.window();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& e = all[i];
    if (e.acquired < run.started || e.acquired > run.stopped) continue;
    ++t.acquisitions;
    if (i == 0 || all[i - 1].worker == e.worker) continue;
    ++t.handoffs;
    const auto& prev = all[i - 1];
    const double us = std::chrono::duration<double, std::micro>(e.acquired - prev.released).count();
    if (us < 0) ++t.negative_latencies;
    t.latencies_us.push_back(us);
    t.from_call_us.push_back(
        std::chrono::duration<double, std::micro>(e.acquired - prev.release_called).count());
  }
}

}  // namespace

std::vector<scenario_result> run_handoff(const bench_settings& s, const handoff_options& o) {
  check_settings(s);
  if (o.workers < 2) throw std::invalid_argument("handoff needs at least 2 workers");
  redis_client control(s.url);
  delete_matching(control, bench_key_patterns);

  const std::string key = "dlock-bench:handoff";
  const auto lo = fixed_lease(o.lease);
  const auto n = static_cast<std::size_t>(o.workers);
  // A basic_lock copy keeps its kind: the handle carries everything.
  const auto lock_of = [&](const client& c, bool fair) -> basic_lock {
    if (fair) return c.fair(key + ":fair");
    if (o.reentrant) return c.reentrant(key);
    return c.simple(key);
  };

  struct variant {
    std::string name;
    bool spin = false;
    bool fair = false;
    std::vector<std::unique_ptr<client>> clients;
    std::vector<basic_lock> locks;  // one per worker
    handoff_totals totals;
  };
  std::vector<variant> variants;
  const auto make_variant = [&](std::string name, bool spin, bool shared, bool fair = false) {
    variant v;
    v.name = std::move(name);
    v.spin = spin;
    v.fair = fair;
    for (std::size_t i = 0; i < (shared ? 1 : n); ++i)
      v.clients.push_back(std::make_unique<client>(s.url));
    for (std::size_t i = 0; i < n; ++i)
      v.locks.push_back(lock_of(*v.clients[shared ? 0 : i], fair));
    variants.push_back(std::move(v));
  };
  const std::string clients_name = std::to_string(o.workers) + "-clients";
  make_variant(clients_name, false, false);
  if (o.fair_variant) make_variant(clients_name + "-fair", false, false, true);
  if (o.shared_client_variant) make_variant("shared-client", false, true);
  make_variant("spin", true, false);

  std::vector<std::vector<hold_event>> logs(n);
  for (auto& l : logs)
    l.reserve(1 << 16);
  std::vector<double> ping_us;

  const int rounds = rounds_of(s);
  const double slice = s.seconds / rounds;
  for (int round = 0; round < rounds; ++round) {
    // One round trip, as the median PING latency through a dlock client.
    {
      auto& r = variants[0].clients[0]->redis();
      const auto until = clock_type::now() + std::chrono::duration_cast<clock_type::duration>(
                                                 std::chrono::duration<double>(slice / 10));
      do {
        const auto t0 = clock_type::now();
        r.command({"PING"});
        ping_us.push_back(
            std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
      } while (clock_type::now() < until);
    }
    for (std::size_t k = 0; k < variants.size(); ++k) {
      auto& v = variants[(k + static_cast<std::size_t>(round)) % variants.size()];
      std::map<std::string, std::uint64_t> before, after;
      const auto step = [&](int w) {
        auto& lock = v.locks[static_cast<std::size_t>(w)];
        lease l = v.spin ? lock.try_acquire(lo) : lock.acquire(lo);
        if (!l) {
          if (v.spin) return;
          throw std::runtime_error("handoff: acquire() returned without the lock");
        }
        const auto acquired = clock_type::now();
        const auto release_called = clock_type::now();
        if (!l.release()) throw std::runtime_error("handoff: release failed");
        logs[static_cast<std::size_t>(w)].push_back(
            {acquired, release_called, clock_type::now(), w});
      };
      const auto run = run_timed(
          o.workers, slice, step,
          [&] {
            for (auto& l : logs)
              l.clear();  // drop the warm-up
            before = command_calls(control);
          },
          [&] { after = command_calls(control); });
      const auto acquisitions_before = v.totals.acquisitions;
      const auto handoffs_before = v.totals.handoffs;
      tally(v.totals, logs, run);
      v.totals.commands += calls_delta(before, after, lock_commands);
      v.totals.pubsub_commands += calls_delta(before, after, pubsub_commands);
      report(s, format("handoff round %d/%d  %-14s %9.0f acquisitions/s %9.0f hand-offs/s",
                       round + 1, rounds, v.name.c_str(),
                       ratio_of(static_cast<double>(v.totals.acquisitions - acquisitions_before),
                                run.window()),
                       ratio_of(static_cast<double>(v.totals.handoffs - handoffs_before),
                                run.window())));
    }
  }

  const double rtt = median(ping_us);
  const auto& spin = variants.back().totals;
  const std::string spin_name = "zero-sleep try_acquire() spin";
  std::vector<scenario_result> results;
  for (const auto& v : variants) {
    if (v.spin) continue;
    const auto& t = v.totals;
    const std::string name = "handoff." + v.name;
    auto lat = t.latencies_us;
    auto spin_lat = spin.latencies_us;
    const double p50 = percentile(lat, 50), p99 = percentile(lat, 99);
    const double spin_p50 = percentile(spin_lat, 50), spin_p99 = percentile(spin_lat, 99);

    scenario_result handoffs{name,
                             "hand-offs/s",
                             t.handoffs_per_s(),
                             spin.handoffs_per_s(),
                             spin_name,
                             ratio_of(t.handoffs_per_s(), spin.handoffs_per_s()),
                             ">= 0.5 x spin",
                             {}};
    handoffs.add_extra("workers", static_cast<double>(o.workers));
    handoffs.add_extra("lock", v.fair ? "fair" : o.reentrant ? "reentrant" : "simple");
    handoffs.add_extra("hand_offs", static_cast<double>(t.handoffs));
    handoffs.add_extra("spin_hand_offs", static_cast<double>(spin.handoffs));
    results.push_back(std::move(handoffs));

    results.push_back({name,
                       "acquisitions/s",
                       t.acquisitions_per_s(),
                       spin.acquisitions_per_s(),
                       spin_name,
                       ratio_of(t.acquisitions_per_s(), spin.acquisitions_per_s()),
                       "",
                       {}});

    scenario_result commands{
        name,
        "commands/acquisition",
        t.commands_per_acquisition(),
        spin.commands_per_acquisition(),
        spin_name,
        ratio_of(t.commands_per_acquisition(), spin.commands_per_acquisition()),
        "<= 3 (evalsha+eval+[un]subscribe)",
        {}};
    const double acquisitions = static_cast<double>(std::max<std::uint64_t>(1, t.all_acquisitions));
    commands.add_extra("scripts_per_acquisition",
                       static_cast<double>(t.commands - t.pubsub_commands) / acquisitions);
    commands.add_extra("subscribe_unsubscribe_per_acquisition",
                       static_cast<double>(t.pubsub_commands) / acquisitions);
    commands.add_extra("same_worker_reacquisitions",
                       ratio_of(static_cast<double>(t.acquisitions - t.handoffs),
                                static_cast<double>(t.acquisitions)));
    commands.add_extra("spin_same_worker_reacquisitions",
                       ratio_of(static_cast<double>(spin.acquisitions - spin.handoffs),
                                static_cast<double>(spin.acquisitions)));
    results.push_back(std::move(commands));

    scenario_result p50_rt{
        name,      "release->next p50 (round trips)", ratio_of(p50, rtt), ratio_of(spin_p50, rtt),
        spin_name, ratio_of(p50, spin_p50),           "<= 3 round trips", {}};
    p50_rt.add_extra("p50_us", p50);
    p50_rt.add_extra("spin_p50_us", spin_p50);
    p50_rt.add_extra("round_trip_us", rtt);
    p50_rt.add_extra("round_trip_note", "median PING latency through a dlock client, same run");
    p50_rt.add_extra("negative_latencies", static_cast<double>(t.negative_latencies));
    p50_rt.add_extra("spin_negative_latencies", static_cast<double>(spin.negative_latencies));
    p50_rt.add_extra(
        "latency_note",
        "from release() returning to a different worker's acquisition returning; negative "
        "when the next holder's grant came back before the releaser's reply");
    auto from_call = t.from_call_us;
    auto spin_from_call = spin.from_call_us;
    p50_rt.add_extra("p50_from_release_call_us", percentile(from_call, 50));
    p50_rt.add_extra("p50_from_release_call_round_trips", ratio_of(percentile(from_call, 50), rtt));
    p50_rt.add_extra("spin_p50_from_release_call_us", percentile(spin_from_call, 50));
    p50_rt.dlock_latency_us = summarize(t.latencies_us);
    p50_rt.reference_latency_us = summarize(spin.latencies_us);
    results.push_back(std::move(p50_rt));

    scenario_result p99_us{name,      "release->next p99 (us)", p99, spin_p99,
                           spin_name, ratio_of(p99, spin_p99),  "",  {}};
    p99_us.add_extra("p99_round_trips", ratio_of(p99, rtt));
    p99_us.add_extra("spin_p99_round_trips", ratio_of(spin_p99, rtt));
    results.push_back(std::move(p99_us));
  }
  if (s.client_metrics) {
    for (const auto& v : variants) {
      if (v.name == "shared-client") s.client_metrics("handoff", v.clients[0]->metrics());
    }
  }
  variants.clear();  // disconnect every client before cleaning up
  delete_matching(control, bench_key_patterns);
  return results;
}

// =============================================================================================
// 4. watchdog

std::vector<scenario_result> run_watchdog(const bench_settings& s, const watchdog_options& o) {
  check_settings(s);
  if (o.leases == 0) throw std::invalid_argument("watchdog needs at least one lease");
  redis_client control(s.url);
  delete_matching(control, bench_key_patterns);

  auto co = client_options::from_url(s.url);
  co.watchdog_lease = o.lease;
  co.watchdog_period = o.period;
  co.renewal_batch = o.renewal_batch;
  std::vector<scenario_result> results;
  {
    client c(co);
    std::vector<lease> leases;
    leases.reserve(o.leases);

    // Take the leases: single attempts (no waiting machinery), many in flight at once.
    const auto t_acquire = clock_type::now();
    constexpr std::size_t wave = 1000;
    for (std::size_t from = 0; from < o.leases; from += wave) {
      std::vector<std::future<lease>> pending;
      for (std::size_t i = from; i < std::min(o.leases, from + wave); ++i) {
        pending.push_back(c.reentrant("dlock-bench:wd:" + std::to_string(i)).acquire_future(-1ms));
      }
      for (auto& f : pending) {
        leases.push_back(f.get());
        if (!leases.back()) throw std::runtime_error("watchdog: a fresh lock was not granted");
      }
    }
    const double acquire_seconds = seconds_between(t_acquire, clock_type::now());
    report(s, format("watchdog: %zu leases taken in %.2f s", leases.size(), acquire_seconds));

    // Counts are read at quiet moments (no renewal in flight), so that every call counted has
    // had its replies counted too: renewal_rounds and renewal_calls move when a round is sent,
    // leases_renewed as its replies arrive.
    const auto quiet_stats = [&](clock_type::time_point deadline) {
      auto a = c.stats();
      for (;;) {
        std::this_thread::sleep_for(30ms);
        auto b = c.stats();
        if ((b.renewal_rounds == a.renewal_rounds && b.renewal_calls == a.renewal_calls &&
             b.leases_renewed == a.leases_renewed) ||
            clock_type::now() >= deadline) {
          return b;
        }
        a = b;
      }
    };
    const auto wait_rounds = [&](std::uint64_t rounds_total, clock_type::time_point deadline) {
      while (c.stats().renewal_rounds < rounds_total && clock_type::now() < deadline) {
        std::this_thread::sleep_for(10ms);
      }
    };
    // Let one renewal round pass, so the window starts in the steady state.
    wait_rounds(c.stats().renewal_rounds + 1, clock_type::now() + 3 * o.period);
    const auto before = quiet_stats(clock_type::now() + o.period);

    // The window: this thread only sleeps; the client's I/O thread renews. CPU time is taken
    // over the sleep alone.
    const int periods = std::max(
        o.periods,
        static_cast<int>(std::ceil(s.seconds * 1000.0 / static_cast<double>(o.period.count()))));
    const double cpu0 = process_cpu_seconds();
    const auto t0 = clock_type::now();
    std::this_thread::sleep_for(o.period * periods);
    const double cpu1 = process_cpu_seconds();
    const auto t1 = clock_type::now();
    const double wall = seconds_between(t0, t1);
    const double cpu_share = (cpu1 - cpu0) / wall;
    wait_rounds(before.renewal_rounds + static_cast<std::uint64_t>(periods),
                clock_type::now() + 2 * o.period);
    const auto after = quiet_stats(clock_type::now() + o.period);

    const auto rounds = after.renewal_rounds - before.renewal_rounds;
    const auto calls = after.renewal_calls - before.renewal_calls;
    const auto renewed = after.leases_renewed - before.leases_renewed;
    std::size_t still_valid = 0;
    for (const auto& l : leases)
      still_valid += l.valid() ? 1 : 0;
    report(s, format("watchdog: %" PRIu64 " rounds, %" PRIu64 " calls, %" PRIu64
                     " renewals, CPU %.2f %% of a core",
                     rounds, calls, renewed, 100 * cpu_share));

    const auto t_release = clock_type::now();
    leases.clear();
    const double release_seconds = seconds_between(t_release, clock_type::now());
    if (s.client_metrics) s.client_metrics("watchdog", c.metrics());

    const double per_call = ratio_of(static_cast<double>(renewed), static_cast<double>(calls));
    const double calls_per_round =
        ratio_of(static_cast<double>(calls), static_cast<double>(rounds));
    const std::string config = format("%zu leases, lease %lld ms, period %lld ms, batch %zu",
                                      o.leases, static_cast<long long>(o.lease.count()),
                                      static_cast<long long>(o.period.count()), o.renewal_batch);
    const auto add_common = [&](scenario_result& r) {
      r.add_extra("config", config);
      r.add_extra("window_s", wall);
      r.add_extra("renewal_rounds", static_cast<double>(rounds));
      r.add_extra("renewal_calls_per_round", calls_per_round);
      r.add_extra("leases_renewed_per_round",
                  ratio_of(static_cast<double>(renewed), static_cast<double>(rounds)));
      r.add_extra("leases_lost", static_cast<double>(after.leases_lost));
      r.add_extra("leases_valid_at_end", static_cast<double>(still_valid));
    };
    scenario_result batching{"watchdog",
                             "leases per renewal call",
                             per_call,
                             100,
                             "design target",
                             ratio_of(per_call, 100),
                             ">= 100 leases per round trip",
                             {}};
    add_common(batching);
    batching.add_extra(
        "note",
        "each renewal call is one EVALSHA of renew.lua; a round's calls leave in one "
        "pipelined write");
    results.push_back(std::move(batching));
    scenario_result cpu{"watchdog",      "client CPU % of a core",     100 * cpu_share,     5,
                        "design target", ratio_of(100 * cpu_share, 5), "< 5 % (ratio < 1)", {}};
    add_common(cpu);
    cpu.add_extra("cpu_seconds", cpu1 - cpu0);
    cpu.add_extra("acquire_s", acquire_seconds);
    cpu.add_extra("release_s", release_seconds);
    results.push_back(std::move(cpu));
  }
  delete_matching(control, bench_key_patterns);
  return results;
}

}  // namespace dlock::bench
