// Multi-locks (dlock/multi_lock.hpp): several reentrant locks taken all or nothing. Processes
// taking overlapping names in opposite orders never deadlock nor overlap (on a standalone
// server and Sentinel, where one script call takes all names, and on a cluster, where names in
// different slots are taken one by one in sorted order); a held name leaves the others free; each
// name keeps its own fencing counter; re-entry, names that are not locks, grants dead on arrival,
// lost holds and fixed leases behave as for a single lock.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <stop_token>
#include <thread>
#include <tuple>

#include "child_process.hpp"
#include "deployments.hpp"
#include "dlock/dlock.hpp"
#include "embedded/redis_cluster.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    out.emplace_back(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items)
    out += (out.empty() ? "" : ",") + i;
  return out;
}

/// Client options from the test worker's URL argument (see tests/worker/lock_worker.cpp).
client_options options_for(const std::string& target) {
  constexpr std::string_view cluster = "cluster:";
  if (target.starts_with(cluster)) return client_options::cluster(split(target.substr(8)));
  return client_options::from_url(target);
}

// ---- the child process of the multi-process tests ----
//
// The integration test binary itself, run with a filter that selects only this (disabled) test,
// and told what to do through the environment:
//   DLOCK_MULTI_TARGET    the deployment, as the test worker's URL argument
//   DLOCK_MULTI_NAMES     the names, comma-separated, in the order given to client::multi
//   DLOCK_MULTI_COUNTERS  counters to increment, non-atomically, under each acquisition
//   DLOCK_MULTI_ROUNDS    how many acquisitions
// It prints "multi-done" (with its client's counts) at the end, or "multi-failed WHY" at the first
// failure.

constexpr const char* child_test = "MultiLockChild.DISABLED_CountUnderEveryName";

void say(const std::string& line) {
  std::cout << line << std::endl;  // flushed: the parent is reading
}

TEST(MultiLockChild, DISABLED_CountUnderEveryName) {
  const char* target = std::getenv("DLOCK_MULTI_TARGET");
  if (!target) GTEST_SKIP() << "run by the multi-process tests only";
  const auto names = split(std::getenv("DLOCK_MULTI_NAMES"));
  const auto counters = split(std::getenv("DLOCK_MULTI_COUNTERS"));
  const int rounds = std::stoi(std::getenv("DLOCK_MULTI_ROUNDS"));
  client c(options_for(target));
  auto m = c.multi(names);
  std::map<std::string, std::uint64_t> last_fence;
  for (int i = 0; i < rounds; ++i) {
    // Bounded, so that a deadlock shows as a failure rather than a hang.
    auto held = m.try_acquire_for(10s);
    if (!held) {
      say("multi-failed round " + std::to_string(i) + " not acquired within 10 s");
      FAIL();
    }
    // Deliberately not atomic: only the lock keeps two processes from losing an update.
    for (const auto& counter : counters) {
      const auto value = c.command(counter, {"GET", counter});
      const long next = value.is_nil() ? 1 : std::stol(value.str()) + 1;
      const std::string text = std::to_string(next);
      c.command(counter, {"SET", counter, text});
    }
    for (const auto& name : m.names()) {
      if (held.fence(name) <= last_fence[name]) {
        say("multi-failed fence of " + name + " went from " + std::to_string(last_fence[name]) +
            " to " + std::to_string(held.fence(name)));
        FAIL();
      }
      last_fence[name] = held.fence(name);
    }
    if (!held.valid() || !held.release()) {
      say("multi-failed round " + std::to_string(i) + " lost or unconfirmed release");
      FAIL();
    }
  }
  // What the contention cost, for the log: attempts beyond one per round were waits.
  const auto stats = c.stats();
  say("multi-done attempts=" + std::to_string(stats.attempts) +
      " unlock_messages=" + std::to_string(stats.unlock_messages));
}

std::string self_path() {
  char buf[PATH_MAX];
  const auto n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  return std::string(buf, static_cast<std::size_t>(n));
}

child_process spawn_multi_child(const std::string& target, const std::vector<std::string>& names,
                                const std::vector<std::string>& counters, int rounds) {
  embedded::spawn_options o = captured;
  o.env = {"DLOCK_MULTI_TARGET=" + target, "DLOCK_MULTI_NAMES=" + join(names),
           "DLOCK_MULTI_COUNTERS=" + join(counters),
           "DLOCK_MULTI_ROUNDS=" + std::to_string(rounds)};
  return child_process(
      {self_path(), std::string("--gtest_filter=") + child_test, "--gtest_also_run_disabled_tests"},
      o);
}

/// Reads the child's lines until it reports; fails the test with what it said otherwise.
void expect_multi_done(child_process& child, std::chrono::milliseconds limit) {
  const auto deadline = steady::now() + limit;
  std::string said;
  while (steady::now() < deadline) {
    const auto line = child.read_line(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()));
    if (!line) break;
    if (line->starts_with("multi-done")) {
      std::cout << "child: " << *line << std::endl;
      EXPECT_EQ(child.wait(), 0);
      return;
    }
    said += *line + "\n";
  }
  ADD_FAILURE() << "the child did not finish; it said:\n" << said;
}

// ---- on every deployment ----

class MultiLockDeployments : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { d_ = start_deployment(GetParam()); }
  void TearDown() override { d_.reset(); }

  deployment& d() { return *d_; }
  std::string key(std::string_view name) const {
    const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
    return "multi:" + std::string(t->name()).substr(0, 24) + ":" + std::string(name);
  }

 private:
  std::unique_ptr<deployment> d_;
};

INSTANTIATE_TEST_SUITE_P(Deployments, MultiLockDeployments, ::testing::ValuesIn(all_deployments),
                         [](const auto& param_info) { return param_info.param; });

// Two processes take {A, B} and {B, A} 300 times each while a third takes B alone as an ordinary
// reentrant lock; each acquisition is bounded (10 s), so a deadlock fails the test. The counters
// are incremented by GET then SET: any overlap would lose an update.
TEST_P(MultiLockDeployments, ProcessesTakingNamesInOppositeOrdersNeverDeadlockNorOverlap) {
  const auto a = key("A"), b = key("B"), count_a = key("count-A"), count_b = key("count-B");
  if (GetParam() == "cluster") {
    // The ordered path is what is under test there: the names must not share a slot.
    ASSERT_NE(embedded::redis_cluster::key_slot(a), embedded::redis_cluster::key_slot(b));
  }
  constexpr int rounds = 300;
  auto forward = spawn_multi_child(d().worker_target(), {a, b}, {count_a, count_b}, rounds);
  auto backward = spawn_multi_child(d().worker_target(), {b, a}, {count_a, count_b}, rounds);
  child_process single({worker_path(), "count", d().worker_target(), "reentrant", b, count_b,
                        std::to_string(rounds)},
                       captured);
  expect_multi_done(forward, 240s);
  expect_multi_done(backward, 240s);
  EXPECT_EQ(single.wait_for("done", 240s), "done");
  EXPECT_EQ(single.wait(), 0);

  client c(d().options());
  EXPECT_EQ(c.command(count_a, {"GET", count_a}).str(), std::to_string(2 * rounds));
  EXPECT_EQ(c.command(count_b, {"GET", count_b}).str(), std::to_string(3 * rounds));
  EXPECT_FALSE(c.reentrant(a).is_locked());
  EXPECT_FALSE(c.reentrant(b).is_locked());
}

// A held name keeps the multi-lock from taking any; once it is released, a waiting multi-lock
// is woken and takes them all.
TEST_P(MultiLockDeployments, AHeldNameLeavesTheOthersFreeUntilItIsReleased) {
  const auto a = key("A"), b = key("B");
  client other(d().options());
  auto held_b = other.reentrant(b).try_acquire();
  ASSERT_TRUE(held_b);
  client c(d().options());
  auto m = c.multi({b, a});
  EXPECT_FALSE(m.try_acquire());
  EXPECT_FALSE(c.reentrant(a).is_locked());
  EXPECT_FALSE(m.try_acquire_for(300ms));
  EXPECT_FALSE(c.reentrant(a).is_locked()) << "a partial hold was kept";

  auto waiting = std::async(std::launch::async, [&] { return m.try_acquire_for(30s); });
  wait_until([&] { return other.reentrant(b).waiting_clients() >= 1; });
  const auto fence_b = held_b.fence();
  held_b.release();
  auto both = waiting.get();
  ASSERT_TRUE(both);
  EXPECT_TRUE(both.valid());
  EXPECT_EQ(both.holds().size(), 2u);
  EXPECT_GT(both.fence(a), 0u);
  EXPECT_GT(both.fence(b), fence_b);
  EXPECT_TRUE(both.release());
  EXPECT_FALSE(c.reentrant(a).is_locked());
  EXPECT_FALSE(c.reentrant(b).is_locked());
}

// ---- a cluster: which path is taken ----

TEST(MultiLockCluster, NamesInDifferentSlotsAreTakenOneByOneAndAHashTagInOneCall) {
  auto d = start_deployment("cluster");
  client c(d->options());
  const std::vector<std::string> spread = {"multi:x", "multi:y", "multi:z"};
  ASSERT_NE(embedded::redis_cluster::key_slot(spread[0]),
            embedded::redis_cluster::key_slot(spread[1]));
  auto before = c.stats().attempts;
  auto held = c.multi(spread).try_acquire();
  ASSERT_TRUE(held);
  EXPECT_EQ(c.stats().attempts - before, 3u) << "one attempt per name, in order";
  for (const auto& name : spread) {
    EXPECT_EQ(c.reentrant(name).hold_count(), 1);
    EXPECT_EQ(held.fence(name), c.reentrant(name).fence());
  }
  EXPECT_TRUE(held.release());

  const std::vector<std::string> tagged = {"{multi}x", "{multi}y", "{multi}z"};
  before = c.stats().attempts;
  held = c.multi(tagged).try_acquire();
  ASSERT_TRUE(held);
  EXPECT_EQ(c.stats().attempts - before, 1u) << "one slot: one script call";
  for (const auto& name : tagged)
    EXPECT_EQ(c.reentrant(name).hold_count(), 1);
  EXPECT_TRUE(held.release());
  for (const auto& name : tagged)
    EXPECT_FALSE(c.reentrant(name).is_locked());
}

// ---- a standalone server ----

class MultiLock : public redis_test {
 protected:
  client_options options() {
    auto o = client_options::from_url(url());
    o.connection.command_timeout = 10s;
    return o;
  }
  bool exists(const std::string& k) { return raw_redis(server().port())({"EXISTS", k}).integer(); }
};

TEST_F(MultiLock, NamesAreSortedAndDeduplicatedAndBadArgumentsRefused) {
  client c(url());
  EXPECT_EQ(c.multi({"b", "a", "b", "c"}).names(), (std::vector<std::string>{"a", "b", "c"}));
  auto code_of = [](auto f) {
    try {
      f();
    } catch (const error& e) {
      return e.code();
    }
    return std::error_code{};
  };
  EXPECT_EQ(code_of([&] { c.multi({}); }), errc::invalid_argument);
  EXPECT_EQ(code_of([&] { c.multi({"a", ""}); }), errc::invalid_argument);
  auto m = c.multi({key("a"), key("b")});
  EXPECT_EQ(code_of([&] { m.try_acquire({.lease_time = 0ms}); }), errc::invalid_argument);
  EXPECT_EQ(code_of([&] { m.try_acquire({.permits = 2}); }), errc::invalid_argument);
  EXPECT_FALSE(exists(key("a")));
}

TEST_F(MultiLock, FiveUncontendedNamesCostOneScriptCall) {
  client c(url());
  raw_redis raw(server().port());
  // The first call loads the script (EVALSHA, then EVAL): measure the second.
  c.multi({key("warm-up")}).try_acquire().release();
  std::vector<std::string> names;
  for (const char* n : {"e", "d", "c", "b", "a"})
    names.push_back(key(n));
  const auto before = c.stats();
  const auto calls_before = script_calls(raw);
  auto held = c.multi(names).try_acquire();
  const auto calls = script_calls(raw) - calls_before;
  const auto after = c.stats();
  ASSERT_TRUE(held);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(after.attempts - before.attempts, 1u);
  EXPECT_EQ(after.grants - before.grants, 5u);
  EXPECT_EQ(after.watched_leases, 5u) << "every hold is renewed by the watchdog";
  ASSERT_EQ(held.holds().size(), 5u);
  std::sort(names.begin(), names.end());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& l = held.holds()[i];
    EXPECT_EQ(l.name(), names[i]) << "holds come in name order";
    EXPECT_TRUE(l.valid());
    EXPECT_TRUE(l.watchdog());
    EXPECT_EQ(l.fence(), c.reentrant(names[i]).fence()) << "each name's own counter";
    EXPECT_EQ(c.reentrant(names[i]).hold_count(), 1);
  }
  EXPECT_TRUE(held.release());
  EXPECT_FALSE(held);
  for (const auto& name : names)
    EXPECT_FALSE(exists(name));
  EXPECT_EQ(c.stats().watched_leases, 0u);
}

TEST_F(MultiLock, AHeldNameMeansNothingIsTakenNotEvenAToken) {
  const auto a = key("a"), b = key("b"), c_name = key("c");
  client other(url());
  auto held_b = other.reentrant(b).try_acquire();
  ASSERT_TRUE(held_b);
  client c(url());
  EXPECT_FALSE(c.multi({a, b, c_name}).try_acquire());
  EXPECT_FALSE(exists(a));
  EXPECT_FALSE(exists(c_name));
  // The one call judged every name before writing anything.
  EXPECT_FALSE(exists(keys_of_lock(a).fence_counter));
  EXPECT_FALSE(exists(keys_of_lock(c_name).fence_counter));
  EXPECT_TRUE(held_b.valid());
}

TEST_F(MultiLock, EachNamesFenceStrictlyIncreasesAcrossMultiAndSingleGrants) {
  const std::vector<std::string> names = {key("a"), key("b"), key("c")};
  client c(url());
  auto m = c.multi(names);
  std::map<std::string, std::uint64_t> last;
  for (int i = 0; i < 5; ++i) {
    auto held = m.try_acquire();
    ASSERT_TRUE(held);
    for (const auto& name : names) {
      EXPECT_GT(held.fence(name), last[name]);
      last[name] = held.fence(name);
    }
    EXPECT_TRUE(held.release());
    // A single lock on one of the names draws from the same counter.
    auto single = c.reentrant(names[1]).try_acquire();
    ASSERT_TRUE(single);
    EXPECT_GT(single.fence(), last[names[1]]);
    last[names[1]] = single.fence();
  }
  EXPECT_EQ(c.multi(names).try_acquire().fence("not one of them"), 0u);
}

TEST_F(MultiLock, TheCallerReentersANameItAlreadyHolds) {
  const auto a = key("a"), b = key("b");
  client c(url());
  auto single = c.reentrant(a).try_acquire();
  ASSERT_TRUE(single);
  const auto before = c.stats().attempts;
  auto held = c.multi({a, b}).try_acquire();
  ASSERT_TRUE(held);
  EXPECT_EQ(c.stats().attempts - before, 1u);
  EXPECT_EQ(held.fence(a), single.fence()) << "a re-entry shares the hold's token";
  EXPECT_EQ(c.reentrant(a).hold_count(), 2);
  EXPECT_EQ(c.reentrant(b).hold_count(), 1);
  // Another thread is another owner: it gets neither.
  auto elsewhere = std::async(std::launch::async, [&] { return c.multi({a, b}).try_acquire(); });
  EXPECT_FALSE(elsewhere.get());
  EXPECT_TRUE(held.release());
  EXPECT_EQ(c.reentrant(a).hold_count(), 1) << "only the multi-lock's hold was released";
  EXPECT_FALSE(exists(b));
  EXPECT_TRUE(single.valid());
  EXPECT_TRUE(single.release());
  EXPECT_FALSE(exists(a));
}

TEST_F(MultiLock, ANameThatIsNotALockThrowsWrongTypeAndTouchesNothingElse) {
  const auto a = key("a"), b = key("b"), c_name = key("c");
  raw_redis(server().port())({"RPUSH", b, "user data"});
  client c(url());
  auto m = c.multi({a, b, c_name});
  for (const auto wait : {0ms, 2000ms}) {
    try {
      m.try_acquire_for(wait);
      ADD_FAILURE() << "no exception";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::wrong_type);
      EXPECT_TRUE(std::string(e.what()).starts_with("lock '" + b + "' holds a list, not a lock"))
          << e.what();
    }
    EXPECT_FALSE(exists(a));
    EXPECT_FALSE(exists(c_name));
    EXPECT_FALSE(exists(keys_of_lock(a).fence_counter));
    EXPECT_EQ(raw_redis(server().port())({"LLEN", b}).integer(), 1);
  }
}

TEST_F(MultiLock, AFixedLeaseIsNotRenewedAndExpiresOnTheServer) {
  client c(url());
  auto held = c.multi({key("a"), key("b")}).try_acquire({.lease_time = 5000ms});
  ASSERT_TRUE(held);
  EXPECT_EQ(c.stats().watched_leases, 0u);
  for (const auto& l : held.holds()) {
    EXPECT_FALSE(l.watchdog());
    const auto pttl = raw_redis(server().port())({"PTTL", l.name()}).integer();
    EXPECT_GT(pttl, 4000);
    EXPECT_LE(pttl, 5000);
  }
}

TEST_F(MultiLock, ALostHoldIsSignalledForItsNameAlone) {
  auto o = options();
  o.watchdog_lease = 1500ms;  // renewed every 500 ms: the loss is noticed soon
  client c(o);
  const std::vector<std::string> names = {key("a"), key("b"), key("c")};
  std::mutex m;
  std::condition_variable cv;
  std::vector<lease_lost_reason> reasons;
  auto held = c.multi(names).try_acquire({.on_lost = [&](lease_lost_reason why) {
    std::lock_guard lock(m);
    reasons.push_back(why);
    cv.notify_all();
  }});
  ASSERT_TRUE(held);
  // on_lost runs first, then the stop token is signalled: wait for the latter.
  bool stopped = false;
  std::stop_callback on_stop(held.holds()[1].stop_token(), [&] {
    std::lock_guard lock(m);
    stopped = true;
    cv.notify_all();
  });
  client(url()).reentrant(names[1]).force_unlock();
  {
    std::unique_lock lock(m);
    ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return stopped; }));
    EXPECT_EQ(reasons, std::vector<lease_lost_reason>{lease_lost_reason::not_held});
  }
  EXPECT_EQ(held.holds()[1].lost_reason(), lease_lost_reason::not_held);
  EXPECT_TRUE(held.holds()[0].valid());
  EXPECT_TRUE(held.holds()[2].valid());
  EXPECT_FALSE(held.valid());
  EXPECT_FALSE(held.release()) << "one hold was no longer held";
  for (const auto& name : names)
    EXPECT_FALSE(exists(name));
}

// A name taken on the ordered path and lost while a later name is awaited is not the caller's
// yet: its loss calls no on_lost of the caller (the wait then ended "not acquired" and, an
// instant earlier, the caller heard of a loss: the torture harness saw exactly that under a
// network stall), and it is not handed out lost: the wait starts again.
TEST_F(MultiLock, AHoldLostBeforeTheOthersCameIsNeitherSignalledNorHandedOut) {
  auto o = options();
  o.watchdog_lease = 600ms;  // renewed every 200 ms: the loss is noticed soon
  client holder(o), taker(o);
  const auto a = key("a"), b = key("b");
  auto b_held = holder.reentrant(b).try_acquire();
  ASSERT_TRUE(b_held);
  std::atomic<int> lost_calls{0};
  auto waiting = std::async(std::launch::async, [&] {
    return taker.multi({a, b}).try_acquire_for(
        30s, {.on_lost = [&](lease_lost_reason) { lost_calls.fetch_add(1); }});
  });
  raw_redis raw(server().port());
  wait_until([&] { return exists(a); });  // taken on the ordered path; b is awaited
  raw({"DEL", a});
  wait_until([&] { return taker.stats().leases_lost >= 1; });
  b_held.release();
  auto held = waiting.get();
  ASSERT_TRUE(held);
  EXPECT_TRUE(held.valid()) << "handed out with a hold already lost";
  EXPECT_EQ(lost_calls.load(), 0) << "the caller heard of a hold it was never given";
  EXPECT_TRUE(exists(a));
  EXPECT_TRUE(held.release());
}

// The server is paused while the one call is in flight and resumed only after the grants'
// validity has passed: they are undone rather than handed out, and the wait goes on (through
// the ordered path) to grants that are alive.
TEST_F(MultiLock, GrantsDeadOnArrivalAreUndoneAndTheWaitGoesOn) {
  auto o = options();
  // A watchdog lease so short that the pause outlives it: born dead just the same, but once
  // handed out it is renewed, so the checks below hold however loaded the machine is.
  o.watchdog_lease = 500ms;
  client c(o);
  const std::vector<std::string> names = {key("a"), key("b"), key("c")};
  const auto before = c.stats();
  server().pause();
  auto got = std::async(std::launch::async, [&] {
    auto held = c.multi(names).try_acquire_for(30s, {.owner = "worker"});
    const bool valid = held.valid();
    std::vector<std::int64_t> counts;
    for (const auto& name : names)
      counts.push_back(c.reentrant(name).hold_count("worker"));
    return std::make_tuple(std::move(held), valid, counts);
  });
  wait_until([&] { return c.stats().attempts > before.attempts; });
  const auto sent = steady::now();
  // Time itself is the condition here: the grants' validity must pass before the server answers.
  wait_until([&] { return steady::now() >= sent + 800ms; });
  server().resume();
  auto [held, valid, counts] = got.get();
  ASSERT_TRUE(held) << "the names were free and the wait had time left";
  EXPECT_TRUE(valid) << "a grant that was dead on arrival was handed out";
  EXPECT_GE(c.stats().grants_born_dead - before.grants_born_dead, 3u);
  EXPECT_EQ(counts, (std::vector<std::int64_t>{1, 1, 1})) << "the dead grants were undone";
  EXPECT_TRUE(held.release());
}

// ---- RedLock: always the ordered path, each name by majority ----

class MultiLockRedLock : public redis_test {
 protected:
  std::size_t server_count() const override { return 3; }
};

TEST_F(MultiLockRedLock, NamesAreTakenOneByOneOnAMajority) {
  client c(client_options::redlock_masters({url(0), url(1), url(2)}));
  const auto before = c.stats().attempts;
  auto held = c.multi({key("b"), key("a")}).try_acquire_for(5s);
  ASSERT_TRUE(held);
  EXPECT_EQ(c.stats().attempts - before, 2u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(raw_redis(server(i).port())({"EXISTS", key("a")}).integer(), 1);
    EXPECT_EQ(raw_redis(server(i).port())({"EXISTS", key("b")}).integer(), 1);
  }
  EXPECT_TRUE(held.release());
  EXPECT_EQ(raw_redis(server(0).port())({"EXISTS", key("a")}).integer(), 0);
}

}  // namespace
}  // namespace dlock::testing
