// Acquisitions that park no thread, against a real redis-server: `co_await lock.acquire_async`
// from plain C++20 coroutines (no asio), cancellation through a stop token and through
// acquire_handle, and cancellations racing grants. After every cancellation the server must show
// the lock held by whoever really holds it, or free: never a grant nobody knows about.
#include <gtest/gtest.h>

#include <atomic>
#include <coroutine>
#include <exception>
#include <future>
#include <random>
#include <sstream>
#include <thread>

#include "async_support.hpp"
#include "dlock/dlock.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// The overloads stay unambiguous for the calls people write.
template <class L>
concept async_overloads = requires(L l, lease_options o, std::stop_token t, acquire_callback cb) {
  { l.acquire_async(1s) } -> std::same_as<acquire_awaitable>;
  { l.acquire_async(1s, {}) } -> std::same_as<acquire_awaitable>;
  { l.acquire_async(1s, o) } -> std::same_as<acquire_awaitable>;
  { l.acquire_async(1s, {.lease_time = 1s}) } -> std::same_as<acquire_awaitable>;
  { l.acquire_async(1s, {}, t) } -> std::same_as<acquire_awaitable>;
  {
    l.acquire_async(1s, [](acquire_result) {})
    } -> std::same_as<acquire_handle>;
  {
    l.acquire_async(1s, [](acquire_result) {}, {.owner = "x"})
    } -> std::same_as<acquire_handle>;
  { l.acquire_async(1s, cb, o) } -> std::same_as<acquire_handle>;
};
static_assert(async_overloads<reentrant_lock> && async_overloads<simple_lock>);

/// How one co_await ended, and where and when the coroutine went on.
struct outcome {
  lease held;
  std::error_code error;
  std::thread::id resumed_on;
  steady::time_point resumed_at;
};

spawned await_into(basic_lock lock, std::chrono::milliseconds wait, lease_options options,
                   std::stop_token stop, std::promise<outcome>& done) {
  outcome out;
  try {
    out.held = co_await lock.acquire_async(wait, std::move(options), std::move(stop));
  } catch (const error& e) {
    out.error = e.code();
  }
  out.resumed_on = std::this_thread::get_id();
  out.resumed_at = steady::now();
  done.set_value(std::move(out));
}

/// The client's I/O thread: where completions run.
std::thread::id io_thread_of(const client& c, const std::string& name) {
  std::promise<std::thread::id> id;
  (void)c.simple(name).acquire_async(-1ms, [&](acquire_result r) {
    r.held.release();
    id.set_value(std::this_thread::get_id());
  });
  return id.get_future().get();
}

basic_lock lock_of(const client& c, const std::string& kind, const std::string& name) {
  if (kind == "simple") return c.simple(name);
  if (kind == "fair") return c.fair(name);
  return c.reentrant(name);
}

/// True once `c` waits for the lock: subscribed to its unlock channel, or (a fair lock, whose
/// waiters listen on channels of their own) in the server's queue.
bool waits(const client& c, const std::string& kind, const std::string& name) {
  auto lock = lock_of(c, kind, name);
  return kind == "fair" ? !lock.info().queue.empty() : lock.waiting_clients() >= 1;
}

class AsyncAcquire : public redis_test {};

TEST_F(AsyncAcquire, AFreeLockIsGrantedToTheCoroutine) {
  client c(url());
  std::promise<outcome> done;
  await_into(c.reentrant(key("r")), 5s, {}, {}, done);
  auto out = done.get_future().get();
  ASSERT_FALSE(out.error) << out.error.message();
  ASSERT_TRUE(out.held.valid());
  EXPECT_TRUE(c.reentrant(key("r")).is_locked());
  EXPECT_EQ(out.held.release_checked(), release_outcome::released);
  EXPECT_FALSE(c.reentrant(key("r")).is_locked());
}

TEST_F(AsyncAcquire, AWaitingCoroutineIsGrantedWhenTheHolderReleasesAndResumesOnTheIoThread) {
  client holder(url());
  auto held = holder.simple(key("s")).try_acquire();
  ASSERT_TRUE(held);
  client c(url());
  const auto io_thread = io_thread_of(c, key("probe"));
  std::promise<outcome> done;
  auto result = done.get_future();
  await_into(c.simple(key("s")), 20s, {}, {}, done);
  wait_until([&] { return c.simple(key("s")).waiting_clients() == 1; });
  EXPECT_EQ(result.wait_for(0s), std::future_status::timeout) << "granted while held elsewhere";
  ASSERT_TRUE(held.release());
  auto out = result.get();
  ASSERT_FALSE(out.error) << out.error.message();
  ASSERT_TRUE(out.held.valid());
  EXPECT_EQ(out.resumed_on, io_thread);
  EXPECT_EQ(out.held.release_checked(), release_outcome::released);
}

TEST_F(AsyncAcquire, AWaitThatEndsWhileSuspendedYieldsAnEmptyLeaseAndLeavesNothingBehind) {
  client holder(url());
  auto held = holder.fair(key("f")).try_acquire();
  ASSERT_TRUE(held);
  client c(url());
  std::promise<outcome> done;
  const auto started = steady::now();
  await_into(c.fair(key("f")), 300ms, {}, {}, done);
  auto out = done.get_future().get();
  EXPECT_FALSE(out.error) << out.error.message();
  EXPECT_FALSE(out.held);
  EXPECT_GE(out.resumed_at - started, 300ms) << "resumed before its wait was over";
  // The waiter's place in the fair queue was handed back before the completion ran, and this
  // query follows it on the same connection.
  const auto info = c.fair(key("f")).info();
  EXPECT_TRUE(info.queue.empty());
  ASSERT_EQ(info.holders.size(), 1u);
  EXPECT_EQ(info.holders.front().owner.rfind(holder.id(), 0), 0u) << "held by someone else";
  EXPECT_TRUE(held.valid());
}

class AsyncCancel : public redis_test, public ::testing::WithParamInterface<std::string> {};

INSTANTIATE_TEST_SUITE_P(Kinds, AsyncCancel, ::testing::Values("simple", "reentrant", "fair"),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(AsyncCancel, AStopWhileSuspendedEndsTheWaitHoldingNothing) {
  client holder(url());
  auto held = lock_of(holder, GetParam(), key("l")).try_acquire();
  ASSERT_TRUE(held);
  client c(url());
  const auto io_thread = io_thread_of(c, key("probe"));
  std::stop_source stop;
  std::promise<outcome> done;
  auto result = done.get_future();
  await_into(lock_of(c, GetParam(), key("l")), 30s, {}, stop.get_token(), done);
  const auto grants_before = c.stats().grants;
  wait_until([&] { return waits(c, GetParam(), key("l")); });
  stop.request_stop();
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  auto out = result.get();
  EXPECT_EQ(out.error, errc::cancelled);
  EXPECT_FALSE(out.held);
  EXPECT_EQ(out.resumed_on, io_thread);
  if (GetParam() == "fair") {
    EXPECT_TRUE(lock_of(c, "fair", key("l")).info().queue.empty());
  }
  // The holder lets go: nothing may be granted to the cancelled waiter.
  ASSERT_TRUE(held.release());
  const auto info = lock_of(c, GetParam(), key("l")).info();
  EXPECT_EQ(info.type, lock_type::none);
  EXPECT_TRUE(info.queue.empty());
  EXPECT_EQ(raw_redis(server().port())({"EXISTS", key("l")}).integer(), 0);
  EXPECT_EQ(c.stats().grants, grants_before);
  client third(url());
  EXPECT_TRUE(lock_of(third, GetParam(), key("l")).try_acquire());
}

TEST_F(AsyncAcquire, AStopRequestedBeforeTheAwaitSendsNothing) {
  client c(url());
  raw_redis raw(server().port());
  const auto scripts_before = script_calls(raw);
  std::stop_source stop;
  stop.request_stop();
  std::promise<outcome> done;
  auto result = done.get_future();
  await_into(c.reentrant(key("r")), 5s, {}, stop.get_token(), done);
  ASSERT_EQ(result.wait_for(0s), std::future_status::ready) << "it should not even suspend";
  auto out = result.get();
  EXPECT_EQ(out.error, errc::cancelled);
  EXPECT_EQ(out.resumed_on, std::this_thread::get_id());
  EXPECT_EQ(c.stats().attempts, 0u);
  EXPECT_EQ(script_calls(raw), scripts_before);
}

TEST_F(AsyncAcquire, ArgumentErrorsAreThrownOnResumeWithoutACommand) {
  client c(url());
  raw_redis raw(server().port());
  const auto scripts_before = script_calls(raw);
  std::promise<outcome> bad_lease, bad_owner;
  await_into(c.reentrant(key("r")), 5s, {.lease_time = -1s}, {}, bad_lease);
  await_into(c.simple(key("s")), 5s, {.owner = "someone"}, {}, bad_owner);
  EXPECT_EQ(bad_lease.get_future().get().error, errc::invalid_argument);
  EXPECT_EQ(bad_owner.get_future().get().error, errc::invalid_argument);
  EXPECT_EQ(c.stats().attempts, 0u);
  EXPECT_EQ(script_calls(raw), scripts_before);
}

/// Counts coroutines that finished, and wakes the test when the last one has.
struct countdown {
  explicit countdown(int n) : left(n) {}
  void done() {
    if (left.fetch_sub(1) == 1) all.set_value();
  }
  std::atomic<int> left;
  std::promise<void> all;
};

spawned take_and_count(basic_lock lock, std::atomic<int>& counter, countdown& finished) {
  auto held = co_await lock.acquire_async(30s);
  if (held) counter.fetch_add(1);
  held.release();
  finished.done();
}

TEST_F(AsyncAcquire, TwoHundredCoroutinesOnDistinctKeysAllComplete) {
  client c(url());
  constexpr int n = 200;
  std::atomic<int> granted{0};
  countdown finished(n);
  for (int i = 0; i < n; ++i) {
    std::string name = "k";  // not "k" + to_string(i): g++ 12 -O3 warns falsely (-Wrestrict)
    name += std::to_string(i);
    take_and_count(c.simple(key(name)), granted, finished);
  }
  ASSERT_EQ(finished.all.get_future().wait_for(60s), std::future_status::ready);
  EXPECT_EQ(granted.load(), n);
}

// Each holder suspends again while it holds the lock (a second acquisition of its own), so that
// a second holder, if the lock let one in, would run inside the first one's critical section.
spawned take_in_turn(basic_lock lock, basic_lock aside, std::atomic<int>& inside,
                     std::atomic<int>& overlaps, std::atomic<int>& counter, countdown& finished) {
  auto held = co_await lock.acquire_async(60s);
  if (held) {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
    auto other = co_await aside.acquire_async(10s);
    const int seen = counter.load(std::memory_order_relaxed);  // a read-modify-write in two
    counter.store(seen + 1, std::memory_order_relaxed);        // steps, as unprotected code does
    other.release();
    inside.fetch_sub(1);
    held.release();
  }
  finished.done();
}

// No owner given: each coroutine owns its acquisition (not the thread that started it, which
// all 200 share), so they exclude each other on a reentrant lock too.
TEST_F(AsyncAcquire, TwoHundredCoroutinesOnOneReentrantLockTakeItOneAtATime) {
  client c(url());
  constexpr int n = 200;
  std::atomic<int> inside{0}, overlaps{0}, counter{0};
  countdown finished(n);
  for (int i = 0; i < n; ++i) {
    take_in_turn(c.reentrant(key("one")), c.simple(key("aside" + std::to_string(i))), inside,
                 overlaps, counter, finished);
  }
  ASSERT_EQ(finished.all.get_future().wait_for(120s), std::future_status::ready);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(counter.load(), n);
  EXPECT_EQ(c.stats().grants, 2u * n);
  EXPECT_FALSE(c.reentrant(key("one")).is_locked());
}

/// A coroutine whose frame the test owns: it starts at once, and the test may destroy it while it
/// is suspended.
struct owned {
  struct promise_type {
    owned get_return_object() noexcept {
      return {std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
  std::coroutine_handle<promise_type> frame;
};

owned await_forever(basic_lock lock, std::atomic<bool>& resumed) {
  auto held = co_await lock.acquire_async(60s);
  resumed = true;
}

TEST_F(AsyncAcquire, DestroyingASuspendedCoroutineCancelsItsAcquisition) {
  client holder(url());
  auto held = holder.simple(key("s")).try_acquire();
  ASSERT_TRUE(held);
  client c(url());
  std::atomic<bool> resumed{false};
  auto task = await_forever(c.simple(key("s")), resumed);
  wait_until([&] { return c.simple(key("s")).waiting_clients() == 1; });
  task.frame.destroy();  // the completion cannot race it: the lock is held elsewhere
  // The acquisition ends (its subscription goes with it), and nothing is granted to it.
  wait_until([&] { return c.simple(key("s")).waiting_clients() == 0; });
  ASSERT_TRUE(held.release());
  EXPECT_FALSE(c.simple(key("s")).is_locked());
  EXPECT_FALSE(resumed.load());
  EXPECT_EQ(c.stats().grants, 0u);
}

// ---- acquire_handle ----

TEST_F(AsyncAcquire, ACancelledWaiterLeavesTheQueueToTheNextOneAndACompletedOneIsNotUndone) {
  client holder(url());
  auto held = holder.simple(key("s")).try_acquire();
  ASSERT_TRUE(held);
  client c(url());
  std::promise<acquire_result> first, second;
  auto cancelled = c.simple(key("s")).acquire_async(
      30s, [&](acquire_result r) { first.set_value(std::move(r)); });
  (void)c.simple(key("s")).acquire_async(30s,
                                         [&](acquire_result r) { second.set_value(std::move(r)); });
  wait_until([&] { return c.simple(key("s")).waiting_clients() == 1; });
  cancelled.cancel();
  cancelled.cancel();  // idempotent
  auto r1 = first.get_future().get();
  EXPECT_EQ(r1.error, errc::cancelled);
  EXPECT_FALSE(r1.held);
  EXPECT_NE(r1.message.find("cancelled"), std::string::npos) << r1.message;
  ASSERT_TRUE(held.release());
  auto r2 = second.get_future().get();
  ASSERT_FALSE(r2.error) << r2.message;
  ASSERT_TRUE(r2.held.valid());
  cancelled.cancel();  // long completed: no effect
  acquire_handle{}.cancel();
  EXPECT_TRUE(r2.held.valid());
  EXPECT_EQ(r2.held.release_checked(), release_outcome::released);
}

/// The fencing counter of a lock: every grant takes the next value.
std::int64_t fence_of(raw_redis& raw, const std::string& name) {
  const auto r = raw({"GET", "redisson_lock_token:{" + name + "}"});
  return r.is_nil() ? 0 : std::stoll(r.str());
}

// An attempt is out when the cancellation comes (the server is paused): the caller hears
// errc::cancelled at once, and the grant the attempt brings back later is undone on the server.
TEST_F(AsyncAcquire, AGrantThatArrivesAfterTheCancellationIsUndone) {
  client c(url());
  raw_redis raw(server().port());
  const auto name = key("s");
  raw({"CLIENT", "PAUSE", "20000", "WRITE"});  // scripts wait; CLIENT UNPAUSE does not
  std::promise<acquire_result> done;
  auto handle = c.simple(name).acquire_async(
      10s, [&](acquire_result r) { done.set_value(std::move(r)); }, {.lease_time = 60s});
  ASSERT_EQ(c.stats().attempts, 1u);
  handle.cancel();
  auto result = done.get_future();
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready) << "the cancel waited for the server";
  EXPECT_EQ(result.get().error, errc::cancelled);
  raw({"CLIENT", "UNPAUSE"});
  // The attempt runs (it takes a fencing token), then its undo: the lock ends free, long before
  // the grant's own 60 s lease would.
  wait_until([&] { return fence_of(raw, name) > 0; });
  wait_until([&] { return raw({"EXISTS", name}).integer() == 0; });
  EXPECT_EQ(c.stats().grants, 0u);
  // The lock is free for the next one, here too.
  EXPECT_TRUE(c.simple(name).try_acquire());
}

// The same for a re-entry: only the count the cancelled attempt added goes; the owner's own hold
// stays intact.
TEST_F(AsyncAcquire, AReentryThatArrivesAfterTheCancellationGivesBackOnlyItsOwnCount) {
  client c(url());
  raw_redis raw(server().port());
  auto lock = c.reentrant(key("r"));
  auto mine = lock.try_acquire({.lease_time = 60s});  // no watchdog: no renewal scripts
  ASSERT_TRUE(mine);
  const auto scripts_before = script_calls(raw);
  raw({"CLIENT", "PAUSE", "20000", "WRITE"});
  std::promise<acquire_result> done;
  // Owned by this thread, as `mine` is: a re-entry, sent at once.
  auto handle = lock.acquire_async(10s, [&](acquire_result r) { done.set_value(std::move(r)); });
  handle.cancel();
  EXPECT_EQ(done.get_future().get().error, errc::cancelled);
  raw({"CLIENT", "UNPAUSE"});
  // The re-entry, then the release of its one count.
  wait_until([&] { return script_calls(raw) >= scripts_before + 2; });
  EXPECT_EQ(lock.hold_count(), 1);
  EXPECT_TRUE(mine.valid());
  EXPECT_EQ(mine.release_checked(), release_outcome::released);
  EXPECT_FALSE(lock.is_locked());
}

// Cancellations at random moments around the holder's release: each round ends with the waiter
// holding the lock (a lease it then releases) or with the lock free, at the latest once the undo
// of a grant that was on its way has run. A grant that reached the server for a waiter told
// "cancelled" and was never undone would keep the lock for the waiter's 60 s lease, and the next
// round (or the last check) would fail.
TEST_P(AsyncCancel, CancellationsRacingGrantsNeverLeaveAnUnknownHolder) {
  client holder(url());
  client c(url());
  const auto name = key("l");
  std::mt19937 random(20240614);
  // A hand-off (release, unlock message, the waiter's attempt and its reply) takes a few round
  // trips: cancellations spread over a longer window land before, during and after it.
  std::uniform_int_distribution<int> release_us(0, 500), cancel_us(0, 8000);
  raw_redis raw(server().port());
  int granted = 0, cancelled = 0;
  ASSERT_TRUE(lock_of(holder, GetParam(), name).try_acquire().release());  // starts the counter
  const auto fence_before = fence_of(raw, name);
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // The last round's cancelled attempt may still be on its way, and take the lock for the
    // moment until its undo: a wait, not a single attempt. A grant left behind would hold it for
    // its 60 s lease.
    auto held = lock_of(holder, GetParam(), name).try_acquire_for(10s);
    ASSERT_TRUE(held) << "the lock was not free within 10 s of the last round's end";
    std::promise<acquire_result> done;
    auto handle = lock_of(c, GetParam(), name)
                      .acquire_async(30s, [&](acquire_result r) { done.set_value(std::move(r)); },
                                     {.lease_time = 60s});
    if (round % 2 == 0) {
      wait_until([&] { return waits(c, GetParam(), name); });
    }
    const auto release_after = std::chrono::microseconds(release_us(random));
    const auto cancel_after = std::chrono::microseconds(cancel_us(random));
    std::thread releaser([&] {
      spin_for(release_after);
      held.release();
    });
    spin_for(cancel_after);
    handle.cancel();
    releaser.join();
    auto result = done.get_future();
    ASSERT_EQ(result.wait_for(20s), std::future_status::ready);
    auto r = result.get();
    if (r.held) {
      ++granted;
      EXPECT_FALSE(r.error);
      EXPECT_EQ(r.held.release_checked(), release_outcome::released);
    } else {
      ++cancelled;
      EXPECT_EQ(r.error, errc::cancelled) << r.message;
    }
    // Free on the server again (an undo may still be on its way; the next round's acquisition,
    // or the last check below, catches a grant that stays).
    wait_until([&] { return raw({"EXISTS", name}).integer() == 0; }, 10s);
    if (GetParam() == "fair") {
      wait_until([&] { return lock_of(c, "fair", name).info().queue.empty(); }, 10s);
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  client third(url());
  EXPECT_TRUE(lock_of(third, GetParam(), name).try_acquire_for(10s))
      << "a grant was left behind by the last round";
  // Every grant takes a fencing token: the holder's, the waiter's delivered ones, the one just
  // now, and those that came back after the cancellation and were undone.
  const auto undone = fence_of(raw, name) - fence_before - 201 - granted;
  std::cout << "[          ] " << granted << " rounds granted, " << cancelled << " cancelled ("
            << undone << " of them after a grant was on its way, undone)\n";
}

}  // namespace
}  // namespace dlock::testing
