// 5. observability: what events, log lines and metrics cost a client. Two clients of the same
// server take turns in slices: one with all of it off, the other with all of it on and callbacks
// that do a little work, so that every event is built, queued, handed to on_event, described
// and handed to the logger. What the "on" client loses against the "off" one is what observing
// costs.
#include "lock_scenarios.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <dlock/dlock.hpp>

#include "bench_support.hpp"

namespace dlock::bench {

namespace {

using namespace std::chrono_literals;

// Every key this scenario writes, and the keys dlock derives from its lock names.
const std::vector<std::string> observability_key_patterns{
    "dlock-bench:obs:*", keys_of_lock("dlock-bench:obs:*").fence_counter,
    keys_of_lock("dlock-bench:obs:*").unlock_channel};

// What the "on" client's callbacks touch, so that neither can be optimized away. Declared before
// the clients: their callbacks run until the clients are gone.
struct callback_work {
  std::atomic<std::uint64_t> events{0};
  std::atomic<std::uint64_t> name_bytes{0};
  std::atomic<std::uint64_t> line_bytes{0};
};

// One side of the comparison.
struct observed_side {
  std::string name;  // "off" or "on"
  std::unique_ptr<client> c;
  std::string key_prefix;     // of its locks' names
  std::uint64_t pairs = 0;    // every pair it made, warm-ups included: two events each when on
  std::vector<double> rates;  // pairs/s per slice, of the row being measured
  std::vector<double> latencies_us;  // per timed pair, uncontended row only
};

// Waits, for up to 2 s, until the client has handed out its events of every pair so far (an
// acquired and a released event each; a log line travels with its event): the delivering thread
// then works in the slice that gave it the work, not in the other side's next one. Returns how
// long it waited, in milliseconds.
double wait_for_delivery(const observed_side& side) {
  const auto t0 = clock_type::now();
  while (clock_type::now() - t0 < 2s) {
    const auto st = side.c->stats();
    if (st.events_delivered + st.events_dropped >= 2 * side.pairs) break;
    std::this_thread::sleep_for(200us);
  }
  return 1e3 * seconds_between(t0, clock_type::now());
}

// Runs `slice(side)` for both sides in `rounds` rounds, the side that goes first alternating
// per round, and after each of the "on" side's slices waits for its events (wait_for_delivery;
// the waits go to `delivery_waits_ms`).
void take_turns(int rounds, std::array<observed_side, 2>& sides,
                const std::function<void(observed_side&)>& slice,
                std::vector<double>& delivery_waits_ms) {
  for (auto& side : sides)
    side.rates.clear();
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t k = 0; k < sides.size(); ++k) {
      auto& side = sides[(k + static_cast<std::size_t>(round)) % sides.size()];
      slice(side);
      if (side.c->options().on_event) delivery_waits_ms.push_back(wait_for_delivery(side));
    }
  }
}

scenario_result observed_row(std::string name, const std::array<observed_side, 2>& sides,
                             int rounds, const client_stats& before, const client_stats& after,
                             const std::vector<double>& delivery_waits_ms) {
  const double on = median(sides[1].rates), off = median(sides[0].rates);
  scenario_result r{
      std::move(name),   "pairs/s", on, off, "the same client with events and metrics off",
      ratio_of(on, off), "",        {}};
  r.add_extra("on_client",
              "collect_metrics, on_event counting events, logger at debug discarding its lines");
  r.add_extra("events_delivered",
              static_cast<double>(after.events_delivered - before.events_delivered));
  r.add_extra("events_dropped", static_cast<double>(after.events_dropped - before.events_dropped));
  // Zero while delivery keeps up with the callers; the waits are outside the timed slices.
  r.add_extra("delivery_wait_ms_max",
              delivery_waits_ms.empty()
                  ? 0
                  : *std::max_element(delivery_waits_ms.begin(), delivery_waits_ms.end()));
  r.add_extra("slices_per_side", static_cast<double>(rounds));
  return r;
}

}  // namespace

std::vector<scenario_result> run_observability(const bench_settings& s,
                                               const observability_options& o) {
  if (s.url.empty()) throw std::invalid_argument("bench_settings::url is empty");
  if (!(s.seconds > 0)) throw std::invalid_argument("bench_settings::seconds must be positive");
  if (o.threads < 1) throw std::invalid_argument("observability needs at least one thread");
  redis_client control(s.url);
  delete_matching(control, observability_key_patterns);

  callback_work work;
  auto off = with_client_knobs(s, client_options::from_url(s.url));
  off.collect_metrics = false;
  auto on = with_client_knobs(s, client_options::from_url(s.url));
  on.collect_metrics = true;
  on.on_event = [&work](const event& e) {
    work.events.fetch_add(1, std::memory_order_relaxed);
    work.name_bytes.fetch_add(e.name.size(), std::memory_order_relaxed);
  };
  on.logger = [&work](log_level, std::string_view line) {
    work.line_bytes.fetch_add(line.size(), std::memory_order_relaxed);
  };
  on.min_log_level = log_level::debug;  // every grant and release is described
  std::array<observed_side, 2> sides{
      observed_side{"off", std::make_unique<client>(off), "dlock-bench:obs:off:", 0, {}, {}},
      observed_side{"on", std::make_unique<client>(on), "dlock-bench:obs:on:", 0, {}, {}}};

  lease_options lo;
  lo.lease_time = o.lease;
  const int rounds = std::max(1, s.rounds);
  const double slice_seconds = s.seconds / rounds;
  std::vector<scenario_result> results;

  // One thread, lock+unlock pairs of a reentrant lock: the cost per pair, latency included.
  {
    std::array<reentrant_lock, 2> locks{sides[0].c->reentrant(sides[0].key_prefix + "uc"),
                                        sides[1].c->reentrant(sides[1].key_prefix + "uc")};
    for (auto& side : sides)
      side.latencies_us.reserve(1 << 16);
    const auto before = sides[1].c->stats();
    std::vector<double> waits;
    take_turns(
        rounds, sides,
        [&](observed_side& side) {
          auto& lock = locks[&side == &sides[0] ? 0 : 1];
          auto& latencies = side.latencies_us;
          const auto mark = latencies.size();
          const auto run = run_timed(
              1, slice_seconds,
              [&](int) {
                const auto t0 = clock_type::now();
                auto l = lock.acquire(lo);
                if (!l) throw std::runtime_error("observability: an uncontended lock was held");
                if (!l.release()) throw std::runtime_error("observability: release failed");
                latencies.push_back(
                    std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
                ++side.pairs;
              },
              [&] { latencies.resize(mark); });  // drop the warm-up's pair
          side.rates.push_back(run.rate());
          report(s, format("observability uncontended %-3s %10.0f pairs/s", side.name.c_str(),
                           run.rate()));
        },
        waits);
    auto r = observed_row("observability.uncontended", sides, rounds, before, sides[1].c->stats(),
                          waits);
    auto on_latency = sides[1].latencies_us, off_latency = sides[0].latencies_us;
    r.add_extra("on_p50_us", percentile(on_latency, 50));
    r.add_extra("on_p99_us", percentile(on_latency, 99));
    r.add_extra("off_p50_us", percentile(off_latency, 50));
    r.add_extra("off_p99_us", percentile(off_latency, 99));
    r.dlock_latency_us = summarize(std::move(sides[1].latencies_us));
    r.reference_latency_us = summarize(std::move(sides[0].latencies_us));
    results.push_back(std::move(r));
  }

  // Threads on keys of their own through the one client, as the throughput scenario loads it:
  // the events of many callers queue for one delivering thread.
  {
    const throughput_load load{o.threads, false, false};
    std::array<std::vector<simple_lock>, 2> locks;
    for (std::size_t k = 0; k < sides.size(); ++k) {
      for (int i = 0; i < o.threads; ++i)
        locks[k].push_back(sides[k].c->simple(sides[k].key_prefix + "tp:" + std::to_string(i)));
    }
    const auto before = sides[1].c->stats();
    std::vector<double> waits;
    take_turns(
        rounds, sides,
        [&](observed_side& side) {
          const auto run = run_throughput_load(locks[&side == &sides[0] ? 0 : 1], load,
                                               slice_seconds, lo, "observability");
          side.pairs += run.steps + static_cast<std::uint64_t>(o.threads);  // and the warm-ups
          side.rates.push_back(run.rate());
          report(s, format("observability%s %-3s %10.0f pairs/s", load.label().c_str(),
                           side.name.c_str(), run.rate()));
        },
        waits);
    auto r = observed_row("observability." + load.row_suffix(), sides, rounds, before,
                          sides[1].c->stats(), waits);
    r.add_extra(load.count_field(), static_cast<double>(o.threads));
    r.add_extra("note", std::string(load.how()));
    results.push_back(std::move(r));
  }

  if (s.client_metrics) s.client_metrics("observability", sides[1].c->metrics());
  for (auto& side : sides)
    side.c.reset();  // disconnected before cleaning up
  delete_matching(control, observability_key_patterns);
  return results;
}

}  // namespace dlock::bench
