// The parts of observing a client that need no server: the queue that hands events to a slow
// callback without blocking whoever queues them, the histograms and the prefix bound, the
// Prometheus text, and the one-line descriptions.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <sstream>
#include <thread>

#include "core/callback_queue.hpp"
#include "dlock/observe.hpp"
#include "locks/runtime/metrics_registry.hpp"

namespace dlock::detail {
namespace {

using namespace std::chrono_literals;

TEST(CallbackQueue, DeliversInOrderOnItsOwnThread) {
  std::vector<int> got;
  std::thread::id on;
  std::promise<void> last;
  callback_queue<int> q(100, [&](int& i) {
    got.push_back(i);
    on = std::this_thread::get_id();
    if (i == 9) last.set_value();
  });
  for (int i = 0; i < 10; ++i)
    q.push(i);
  last.get_future().wait();
  EXPECT_EQ(q.dropped(), 0u);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_NE(on, std::this_thread::get_id());
}

// While the callback is stuck, pushing never waits: beyond the limit, items are dropped and
// counted. Closed, the queue gives up on what waits once its grace period is over.
TEST(CallbackQueue, ASlowCallbackNeverBlocksThePusherAndOverflowIsCounted) {
  std::promise<void> entered;
  std::promise<void> go;
  auto go_on = go.get_future().share();
  std::atomic<int> delivered{0};
  auto q = std::make_unique<callback_queue<int>>(3, [&](int& i) {
    if (i == 0) {
      entered.set_value();
      go_on.wait();
    }
    ++delivered;
  });
  q->push(0);
  entered.get_future().wait();  // the callback now holds item 0
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1; i <= 1000; ++i)
    q->push(i);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "pushes waited for the callback";
  EXPECT_EQ(q->dropped(), 997u);
  go.set_value();
  q.reset();  // delivers the 3 that waited, within the grace period
  EXPECT_EQ(delivered.load(), 4);
}

TEST(CallbackQueue, AClosingQueueDropsWhatItCannotDeliverInItsGracePeriod) {
  std::atomic<int> delivered{0};
  auto q = std::make_unique<callback_queue<int>>(100, [&](int&) {
    std::this_thread::sleep_for(300ms);
    ++delivered;
  });
  for (int i = 0; i < 20; ++i)
    q->push(i);
  const auto start = std::chrono::steady_clock::now();
  q.reset();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 3s);
  EXPECT_GE(delivered.load(), 6);
  EXPECT_LT(delivered.load(), 20);
}

TEST(Histogram, CountsEachObservationInTheFirstBucketThatHoldsIt) {
  histogram h;
  h.observe(50us);   // <= 100 us
  h.observe(100us);  // on a bound: that bucket
  h.observe(2ms);    // <= 2.5 ms
  h.observe(2h);     // beyond an hour: the overflow bucket
  h.observe(-5ms);   // a clock that went backwards counts as 0
  const auto s = h.snapshot();
  ASSERT_EQ(s.counts.size(), s.upper_bounds.size() + 1);
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.counts[0], 3u);
  EXPECT_EQ(s.counts[4], 1u);  // 0.0025
  EXPECT_DOUBLE_EQ(s.upper_bounds[4], 0.0025);
  EXPECT_EQ(s.counts.back(), 1u);
  EXPECT_NEAR(s.sum_seconds, 7200.00215, 1e-6);
}

TEST(MetricPrefix, IsTheFirstSegmentByDefault) {
  EXPECT_EQ(first_segment("jobs:report:daily"), "jobs");
  EXPECT_EQ(first_segment("mail/outbox"), "mail");
  EXPECT_EQ(first_segment("plain"), "plain");
  EXPECT_EQ(first_segment(":leading"), "");
}

TEST(Prometheus, WritesFamiliesWithHelpTypeAndCumulativeBuckets) {
  metrics_snapshot m;
  m.counters.grants = 3;
  lock_metrics l;
  l.kind = "simple";
  l.prefix = "a\"b";
  l.granted = 3;
  histogram h;
  h.observe(200us);
  h.observe(200us);
  h.observe(3s);
  l.wait = h.snapshot();
  l.hold = histogram().snapshot();
  m.locks.push_back(l);
  std::ostringstream out;
  write_prometheus(m, out);
  const auto text = out.str();
  EXPECT_NE(text.find("# HELP dlock_acquisitions_total "), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE dlock_acquisitions_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("dlock_acquisitions_total{kind=\"simple\",prefix=\"a\\\"b\",outcome="
                      "\"granted\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE dlock_acquire_wait_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("dlock_acquire_wait_seconds_bucket{kind=\"simple\",prefix=\"a\\\"b\",le="
                      "\"0.0001\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("le=\"0.00025\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("le=\"2.5\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("le=\"5\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("dlock_acquire_wait_seconds_count{kind=\"simple\",prefix=\"a\\\"b\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("dlock_grants_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("dlock_watched_leases 0\n"), std::string::npos);
  // No round trips collected (metrics off): no such family.
  EXPECT_EQ(text.find("dlock_round_trip_seconds"), std::string::npos);
}

TEST(Describe, SaysWhatHappenedOnOneLineWhateverTheName) {
  event e;
  e.type = event_type::lost;
  e.name = "jobs:\nforged line \xff";
  e.kind = "leased_semaphore";
  e.lost_reason = lease_lost_reason::expired;
  e.held = 31'200'000us;
  e.detail = "no renewal succeeded";
  const auto line = describe(e);
  EXPECT_EQ(line,
            "leased semaphore 'jobs:\\x0aforged line \\xff' LOST (expired) after 31.2 s: no "
            "renewal succeeded");
  e.type = event_type::acquired;
  e.name = "a";
  e.kind = "reentrant";
  e.fence = 42;
  e.waited = 1500us;
  e.owner = "uuid:1";
  EXPECT_EQ(describe(e), "reentrant lock 'a' acquired after 1.5 ms, fence 42, owner uuid:1");
  EXPECT_EQ(to_string(event_type::woken_without_message), "woken_without_message");
  EXPECT_EQ(to_string(log_level::warning), "warning");
}

}  // namespace
}  // namespace dlock::detail
