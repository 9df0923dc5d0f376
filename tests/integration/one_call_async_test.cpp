// The calls that take one round trip, without parking a thread: lease::extend_async,
// semaphore::release_async(n), leased_semaphore::release_async(id),
// countdown_latch::count_down_async, fenced_set_async, the asio forms of lease::write_while_held
// and write_and_release, and a latch's wait as a C++20 awaitable
// and an asio operation. Against real servers: each asynchronous form does what its blocking form
// does (the same server state, the same errors with the server's words), completes on the client's
// I/O thread (or the asio handler's executor), works where blocking calls are refused (inside a
// completion), and sends nothing for an argument error.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <future>
#include <optional>
#include <stop_token>
#include <thread>

#include "async_support.hpp"
#include "deployments.hpp"
#include "dlock/asio.hpp"
#include "dlock/dlock.hpp"
#include "io_runner.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

// The overloads stay unambiguous for the calls people write.
template <class L, class S, class P, class C>
concept one_call_overloads = requires(L l, S s, P p, C latch, std::stop_token t) {
  { l.extend_async(1s) } -> std::same_as<call_awaitable<bool>>;
  {
    l.extend_async(1s, [](call_result<bool>) {})
    } -> std::same_as<void>;
  { s.release_async() } -> std::same_as<call_awaitable<void>>;
  { s.release_async(2) } -> std::same_as<call_awaitable<void>>;
  {
    s.release_async(2, [](call_result<void>) {})
    } -> std::same_as<void>;
  { p.release_async("00") } -> std::same_as<call_awaitable<bool>>;
  {
    p.release_async("00", [](call_result<bool>) {})
    } -> std::same_as<void>;
  { latch.count_down_async() } -> std::same_as<call_awaitable<std::int64_t>>;
  {
    latch.count_down_async([](call_result<std::int64_t>) {})
    } -> std::same_as<void>;
  { latch.wait_async(1s) } -> std::same_as<call_awaitable<bool>>;
  { latch.wait_async(1s, t) } -> std::same_as<call_awaitable<bool>>;
  {
    latch.wait_async(1s, [](latch_wait_result) {})
    } -> std::same_as<acquire_handle>;
};
static_assert(one_call_overloads<lease, semaphore, leased_semaphore, countdown_latch>);

template <class T>
using called = called_back<call_result<T>>;

// The coroutines below are lambdas held in a named variable: a coroutine's frame reaches the
// lambda's captures through the closure, which must outlive every suspension.

class OneCallAsync : public redis_test {
 protected:
  std::int64_t pttl(raw_redis& raw, const std::string& name) {
    return raw({"PTTL", name}).integer();
  }
  /// Clients listening for the latch `name` to open: its waiters.
  std::int64_t latch_waiters(raw_redis& raw, const std::string& name) {
    return raw({"PUBSUB", "NUMSUB", "redisson_countdownlatch__channel__{" + name + "}"})
        .at(1)
        .integer();
  }
};

// ---- lease::extend_async ----

TEST_F(OneCallAsync, ExtendPushesTheExpiryOutAndCompletesOnTheIoThread) {
  raw_redis raw(server().port());
  client c(url());
  auto held = c.simple(key("l")).try_acquire({.lease_time = 2s});
  ASSERT_TRUE(held);
  const auto before = held.valid_until();
  std::promise<called<bool>> done;
  held.extend_async(60s, into(done, c.simple(key("p"))));
  auto got = settle(done.get_future());
  ASSERT_FALSE(got.result.error) << got.result.message;
  EXPECT_TRUE(got.result.value);
  EXPECT_TRUE(got.on_io_thread);
  EXPECT_GT(pttl(raw, key("l")), 30'000);
  EXPECT_GT(held.valid_until(), before + 30s);
  EXPECT_TRUE(held.release());
}

TEST_F(OneCallAsync, ExtendOfALockNoLongerHeldIsFalseAndTheLeaseIsLostLoudly) {
  raw_redis raw(server().port());
  client c(url());
  std::promise<lease_lost_reason> lost;
  auto held = c.reentrant(key("l")).try_acquire(
      {.lease_time = 30s, .on_lost = [&](lease_lost_reason why) { lost.set_value(why); }});
  ASSERT_TRUE(held);
  raw({"DEL", key("l")});
  std::promise<called<bool>> done;
  held.extend_async(60s, into(done, c.simple(key("p"))));
  auto got = settle(done.get_future());
  ASSERT_FALSE(got.result.error) << got.result.message;
  EXPECT_FALSE(got.result.value);
  EXPECT_EQ(settle(lost.get_future()), lease_lost_reason::not_held);
  EXPECT_FALSE(held.valid());
  EXPECT_EQ(held.lost_reason(), lease_lost_reason::not_held);
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0) << "extending must not recreate the lock";
}

TEST_F(OneCallAsync, ExtendRefusesBadArgumentsThroughTheCallbackWithNothingSent) {
  raw_redis raw(server().port());
  client c(url());
  auto held = c.simple(key("l")).try_acquire({.lease_time = 30s});
  ASSERT_TRUE(held);
  const auto calls = script_calls(raw);
  std::promise<called<bool>> negative;
  held.extend_async(-1s, into(negative, c.simple(key("p"))));
  auto got = settle(negative.get_future());
  EXPECT_EQ(got.result.error, errc::invalid_argument);
  EXPECT_NE(got.result.message.find("lease_time"), std::string::npos) << got.result.message;
  EXPECT_TRUE(got.on_io_thread) << "reported as every outcome is";
  EXPECT_EQ(script_calls(raw), calls);

  // An empty lease has no client to report through: at once, on this thread.
  lease empty;
  std::optional<call_result<bool>> at_once;
  empty.extend_async(10s, [&](call_result<bool> r) { at_once = std::move(r); });
  ASSERT_TRUE(at_once);
  EXPECT_EQ(at_once->error, errc::lease_lost);

  // A semaphore's permits have no lease.
  auto sem = c.semaphore(key("s"));
  ASSERT_TRUE(sem.try_set_permits(1));
  auto permit = sem.try_acquire();
  ASSERT_TRUE(permit);
  std::promise<called<bool>> no_lease;
  permit.extend_async(10s, into(no_lease, c.simple(key("p"))));
  EXPECT_EQ(settle(no_lease.get_future()).result.error, errc::invalid_argument);
  EXPECT_TRUE(held.release());
}

TEST_F(OneCallAsync, ExtendWorksInsideACompletionWhereTheBlockingFormIsRefused) {
  raw_redis raw(server().port());
  client c(url());
  std::promise<std::pair<bool, std::error_code>> done;
  lease kept;
  (void)c.simple(key("l")).acquire_async(5s, [&](acquire_result r) {
    kept = std::move(r.held);
    std::error_code blocking;
    try {
      kept.extend(60s);
    } catch (const error& e) {
      blocking = e.code();
    }
    kept.extend_async(60s, [&, blocking](call_result<bool> x) {
      done.set_value({x.value && !x.error, blocking});
    });
  });
  auto [extended, blocking] = settle(done.get_future());
  EXPECT_EQ(blocking, errc::invalid_argument);
  EXPECT_TRUE(extended);
  EXPECT_GT(pttl(raw, key("l")), 30'000);
  EXPECT_TRUE(kept.release());
}

TEST_F(OneCallAsync, AnAwaitedExtendYieldsTrueAndALeaseReleasedBeforeTheAwaitThrowsLeaseLost) {
  raw_redis raw(server().port());
  client c(url());
  auto held = c.simple(key("l")).try_acquire({.lease_time = 2s});
  ASSERT_TRUE(held);
  std::promise<void> done;
  bool extended = false;
  std::error_code after_release;
  auto extend_then_release = [&]() -> spawned {
    extended = co_await held.extend_async(60s);
    auto later = held.extend_async(60s);  // refers to the hold, which goes now
    held.release();
    try {
      (void)co_await std::move(later);
    } catch (const error& e) {
      after_release = e.code();
    }
    done.set_value();
  };
  extend_then_release();
  settle(done.get_future());
  EXPECT_TRUE(extended);
  EXPECT_EQ(after_release, errc::lease_lost);
  // Released from the I/O thread, not waited for: asked through the client's own connection.
  EXPECT_FALSE(c.simple(key("l")).is_locked());
}

// ---- semaphores ----

TEST_F(OneCallAsync, ReleasingPermitsWakesAWaiterAndRefusesBadInputWithoutSending) {
  raw_redis raw(server().port());
  client c(url());
  auto sem = c.semaphore(key("s"));
  ASSERT_TRUE(sem.try_set_permits(0));
  client waiter_client(url());
  auto waiting = std::async(std::launch::async, [&] {
    return waiter_client.semaphore(key("s")).try_acquire_for(30s, {.permits = 2});
  });
  wait_until([&] { return sem.info().waiters >= 1; });
  std::promise<called<void>> done;
  sem.release_async(3, into(done, c.simple(key("p"))));
  auto got = settle(done.get_future());
  ASSERT_FALSE(got.result.error) << got.result.message;
  EXPECT_TRUE(got.on_io_thread);
  auto permits = settle(std::move(waiting));
  ASSERT_TRUE(permits) << "the waiter was not woken";
  EXPECT_EQ(sem.available(), 1);

  const auto calls = script_calls(raw);
  std::promise<called<void>> zero;
  sem.release_async(0, into(zero, c.simple(key("p"))));
  auto refused = settle(zero.get_future());
  EXPECT_EQ(refused.result.error, errc::invalid_argument);
  EXPECT_TRUE(refused.on_io_thread);
  EXPECT_EQ(script_calls(raw), calls);
  EXPECT_EQ(sem.available(), 1);
}

TEST_F(OneCallAsync, ReleasingIntoAKeyOfTheWrongTypeIsRefusedInTheServersWordsAndChangesNothing) {
  raw_redis raw(server().port());
  raw({"RPUSH", key("s"), "x"});
  raw({"SET", key("latch"), "not a number"});
  client c(url());
  std::promise<called<void>> released;
  c.semaphore(key("s")).release_async(1, into(released, c.simple(key("p"))));
  auto got = settle(released.get_future());
  EXPECT_EQ(got.result.error, errc::wrong_type);
  EXPECT_NE(got.result.message.find("list"), std::string::npos) << got.result.message;
  std::promise<called<std::int64_t>> counted;
  c.latch(key("latch")).count_down_async(into(counted, c.simple(key("p"))));
  auto down = settle(counted.get_future());
  EXPECT_EQ(down.result.error, errc::wrong_type);
  EXPECT_NE(down.result.message.find("latch '" + key("latch") + "'"), std::string::npos)
      << down.result.message;
  EXPECT_EQ(raw({"LRANGE", key("s"), "0", "-1"}).elements().size(), 1u);
  EXPECT_EQ(raw({"GET", key("latch")}).str(), "not a number");
}

TEST_F(OneCallAsync, ALeasedPermitIsReleasedByIdFromAnotherClientOnceOnly) {
  client holder(url());
  ASSERT_TRUE(holder.leased_semaphore(key("s")).try_set_permits(1));
  auto permit = holder.leased_semaphore(key("s")).try_acquire({.lease_time = 60s});
  ASSERT_TRUE(permit);
  const auto id = permit.permit_id();
  client c(url());
  auto sem = c.leased_semaphore(key("s"));
  std::promise<called<bool>> first, second, bad;
  sem.release_async(id, into(first, c.simple(key("p"))));
  auto got = settle(first.get_future());
  ASSERT_FALSE(got.result.error) << got.result.message;
  EXPECT_TRUE(got.result.value);
  EXPECT_TRUE(got.on_io_thread);
  EXPECT_EQ(sem.available(), 1);
  sem.release_async(id, into(second, c.simple(key("p"))));
  auto again = settle(second.get_future());
  EXPECT_FALSE(again.result.error) << again.result.message;
  EXPECT_FALSE(again.result.value) << "released twice";
  EXPECT_EQ(sem.available(), 1);
  sem.release_async("not hex", into(bad, c.simple(key("p"))));
  EXPECT_EQ(settle(bad.get_future()).result.error, errc::invalid_argument);
}

TEST_F(OneCallAsync, AwaitedSemaphoreReleasesGiveBackPermitsAndThrowTheBlockingFormsErrors) {
  client c(url());
  auto sem = c.semaphore(key("s"));
  ASSERT_TRUE(sem.try_set_permits(0));
  auto leased = c.leased_semaphore(key("ls"));
  ASSERT_TRUE(leased.try_set_permits(1));
  auto permit = leased.try_acquire({.lease_time = 60s});
  ASSERT_TRUE(permit);
  std::promise<void> done;
  bool released_by_id = false;
  std::error_code zero;
  auto release_each_way = [&]() -> spawned {
    co_await sem.release_async(2);
    co_await sem.release_async();
    released_by_id = co_await leased.release_async(permit.permit_id());
    try {
      co_await sem.release_async(0);
    } catch (const error& e) {
      zero = e.code();
    }
    done.set_value();
  };
  release_each_way();
  settle(done.get_future());
  EXPECT_EQ(sem.available(), 3);
  EXPECT_TRUE(released_by_id);
  EXPECT_EQ(leased.available(), 1);
  EXPECT_EQ(zero, errc::invalid_argument);
}

class OneCallAsyncOverRedLock : public redis_test {
 protected:
  std::size_t server_count() const override { return 3; }
};

TEST_F(OneCallAsyncOverRedLock, ExtendAsksTheMajorityAndCountsAndPermitsAreRefused) {
  client c(client_options::redlock_masters({url(0), url(1), url(2)}));
  auto held = c.simple(key("l")).try_acquire({.lease_time = 2s});
  ASSERT_TRUE(held);
  std::promise<called<bool>> extended;
  held.extend_async(60s, into(extended, c.simple(key("p"))));
  auto got = settle(extended.get_future());
  ASSERT_FALSE(got.result.error) << got.result.message;
  EXPECT_TRUE(got.result.value);
  for (std::size_t i = 0; i < 3; ++i) {
    raw_redis raw(server(i).port());
    EXPECT_GT(raw({"PTTL", key("l")}).integer(), 30'000) << "master " << i;
  }
  // Gone from two of the three masters: no majority holds it.
  for (std::size_t i = 0; i < 2; ++i) {
    raw_redis raw(server(i).port());
    raw({"DEL", key("l")});
  }
  std::promise<called<bool>> lost;
  held.extend_async(60s, into(lost, c.simple(key("p"))));
  auto no_majority = settle(lost.get_future());
  EXPECT_FALSE(no_majority.result.error) << no_majority.result.message;
  EXPECT_FALSE(no_majority.result.value);
  EXPECT_EQ(held.lost_reason(), lease_lost_reason::not_held);

  std::promise<called<void>> released;
  c.semaphore(key("s")).release_async(1, into(released, c.simple(key("p"))));
  EXPECT_EQ(settle(released.get_future()).result.error, errc::invalid_argument);
  std::promise<called<std::int64_t>> counted;
  c.latch(key("latch")).count_down_async(into(counted, c.simple(key("p"))));
  EXPECT_EQ(settle(counted.get_future()).result.error, errc::invalid_argument);
}

// ---- fenced writes ----

TEST_F(OneCallAsync, AFencedWriteLandsForTheHolderAndAStaleHoldersIsRejected) {
  raw_redis raw(server().port());
  client c(url());
  auto old_holder = c.simple(key("l")).try_acquire({.lease_time = 30s});
  ASSERT_TRUE(old_holder);
  const auto old_fence = old_holder.fence();
  std::promise<called<fenced_write_result>> first;
  fenced_set_async(c, key("data"), "v1", old_fence, into(first, c.simple(key("p"))));
  auto wrote = settle(first.get_future());
  ASSERT_FALSE(wrote.result.error) << wrote.result.message;
  EXPECT_TRUE(wrote.result.value.written);
  EXPECT_EQ(wrote.result.value.highest, old_fence);
  EXPECT_TRUE(wrote.on_io_thread);
  EXPECT_TRUE(old_holder.release());

  auto new_holder = c.simple(key("l")).try_acquire({.lease_time = 30s});
  ASSERT_TRUE(new_holder);
  struct seen {
    fenced_write_result newer, stale;
  } s;
  std::promise<void> done;
  auto write_both = [&]() -> spawned {
    s.newer = co_await fenced_set_async(c, key("data"), "v2", new_holder.fence());
    s.stale = co_await fenced_set_async(c, key("data"), "stale", old_fence);
    done.set_value();
  };
  write_both();
  settle(done.get_future());
  EXPECT_TRUE(s.newer.written);
  EXPECT_FALSE(s.stale.written);
  EXPECT_EQ(s.stale.highest, new_holder.fence());
  EXPECT_EQ(raw({"GET", key("data")}).str(), "v2") << "the stale write changed nothing";

  // A fence record that is not a token: refused in the server's words, nothing written.
  raw({"RPUSH", fence_record_key(key("other")), "x"});
  std::promise<called<fenced_write_result>> wrong;
  fenced_set_async(c, key("other"), "v", new_holder.fence(), into(wrong, c.simple(key("p"))));
  auto refused = settle(wrong.get_future());
  EXPECT_EQ(refused.result.error, errc::wrong_type) << refused.result.message;
  EXPECT_EQ(raw({"EXISTS", key("other")}).integer(), 0);
  raw({"SET", fence_record_key(key("third")), "not a token"});
  std::promise<called<fenced_write_result>> text;
  fenced_set_async(c, key("third"), "v", new_holder.fence(), into(text, c.simple(key("p"))));
  auto not_a_token = settle(text.get_future());
  EXPECT_EQ(not_a_token.result.error, errc::wrong_type);
  EXPECT_EQ(not_a_token.result.message,
            "WRONGTYPE the fence record holds a string that is not a token");
  EXPECT_EQ(raw({"EXISTS", key("third")}).integer(), 0) << "nothing written";
  EXPECT_EQ(raw({"GET", fence_record_key(key("third"))}).str(), "not a token");
  EXPECT_TRUE(new_holder.release());
}

// ---- latches ----

TEST_F(OneCallAsync, CountDownsYieldTheCountLeftAndTheLastOpensAWaitingCoroutine) {
  raw_redis raw(server().port());
  client c(url());
  auto latch = c.latch(key("l"));
  ASSERT_TRUE(latch.try_set_count(2));
  std::promise<bool> reached;
  auto wait_for_open = [&]() -> spawned { reached.set_value(co_await latch.wait_async(30s)); };
  wait_for_open();
  auto opened = reached.get_future();
  wait_until([&] { return latch_waiters(raw, key("l")) >= 1; });
  std::promise<called<std::int64_t>> first;
  latch.count_down_async(into(first, c.simple(key("p"))));
  auto one = settle(first.get_future());
  ASSERT_FALSE(one.result.error) << one.result.message;
  EXPECT_EQ(one.result.value, 1);
  EXPECT_TRUE(one.on_io_thread);
  EXPECT_EQ(opened.wait_for(0s), std::future_status::timeout) << "opened at 1";
  std::promise<std::int64_t> second;
  auto count_down_last = [&]() -> spawned { second.set_value(co_await latch.count_down_async()); };
  count_down_last();
  EXPECT_EQ(settle(second.get_future()), 0);
  EXPECT_TRUE(settle(std::move(opened)));
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0);
  // A latch that does not exist stays so: the count left is 0, and nothing is created.
  std::promise<std::int64_t> third;
  auto count_down_gone = [&]() -> spawned { third.set_value(co_await latch.count_down_async()); };
  count_down_gone();
  EXPECT_EQ(settle(third.get_future()), 0);
  EXPECT_EQ(raw({"EXISTS", key("l")}).integer(), 0);
}

TEST_F(OneCallAsync, AnAwaitedLatchWaitEndsFalseAtItsDeadlineAndThrowsCancelledOnStop) {
  raw_redis raw(server().port());
  client c(url());
  auto latch = c.latch(key("l"));
  ASSERT_TRUE(latch.try_set_count(1));
  std::promise<bool> timed;
  auto wait_past_deadline = [&]() -> spawned { timed.set_value(co_await latch.wait_async(200ms)); };
  wait_past_deadline();
  EXPECT_FALSE(settle(timed.get_future())) << "the deadline passed while suspended";

  std::stop_source stop;
  std::promise<std::error_code> cancelled;
  auto wait_until_stopped = [&]() -> spawned {
    try {
      // Built in a statement of its own, as docs/library.md advises for arguments made inside
      // a co_await with GCC 12.
      auto waiting = latch.wait_async(std::chrono::milliseconds::max(), stop.get_token());
      (void)co_await waiting;
      cancelled.set_value({});
    } catch (const error& e) {
      cancelled.set_value(e.code());
    }
  };
  wait_until_stopped();
  auto outcome = cancelled.get_future();
  wait_until([&] { return latch_waiters(raw, key("l")) >= 1; });
  ASSERT_EQ(outcome.wait_for(0s), std::future_status::timeout);
  stop.request_stop();
  EXPECT_EQ(settle(std::move(outcome)), errc::cancelled);
  wait_until([&] { return latch_waiters(raw, key("l")) == 0; });  // it stopped listening

  // A token stopped before the await sends nothing and throws at once.
  std::stop_source already;
  already.request_stop();
  std::optional<std::error_code> early;
  auto wait_stopped_early = [&]() -> spawned {
    try {
      auto waiting = latch.wait_async(10s, already.get_token());
      (void)co_await waiting;
    } catch (const error& e) {
      early = e.code();
    }
  };
  wait_stopped_early();
  ASSERT_TRUE(early) << "suspended with a stopped token";
  EXPECT_EQ(*early, errc::cancelled);
}

TEST_F(OneCallAsync, ALatchWaitsHandleCancelsItAndACancelAfterTheEndChangesNothing) {
  raw_redis raw(server().port());
  client c(url());
  auto latch = c.latch(key("l"));
  ASSERT_TRUE(latch.try_set_count(1));
  std::promise<latch_wait_result> first;
  auto handle = latch.wait_async(std::chrono::milliseconds::max(),
                                 [&](latch_wait_result r) { first.set_value(std::move(r)); });
  wait_until([&] { return latch_waiters(raw, key("l")) >= 1; });
  handle.cancel();
  auto got = settle(first.get_future());
  EXPECT_EQ(got.error, errc::cancelled);
  EXPECT_FALSE(got.reached);
  EXPECT_NE(got.message.find(key("l")), std::string::npos) << got.message;

  std::promise<latch_wait_result> second;
  auto finished = latch.wait_async(30s, [&](latch_wait_result r) { second.set_value(r); });
  latch.count_down();
  auto reached = settle(second.get_future());
  EXPECT_TRUE(reached.reached);
  EXPECT_FALSE(reached.error);
  finished.cancel();  // too late: nothing runs twice, and the client goes on
  EXPECT_TRUE(latch.wait_for(0s));
}

// ---- asio ----

#if defined(ASIO_HAS_CO_AWAIT)
TEST_F(OneCallAsync, AsioOperationsRunOnTheCoroutinesThreadWithDlockErrorCodes) {
  raw_redis raw(server().port());
  client c(url());
  auto sem = c.semaphore(key("s"));
  ASSERT_TRUE(sem.try_set_permits(0));
  auto leased = c.leased_semaphore(key("ls"));
  ASSERT_TRUE(leased.try_set_permits(1));
  auto latch = c.latch(key("latch"));
  ASSERT_TRUE(latch.try_set_count(2));
  auto held = c.simple(key("l")).try_acquire({.lease_time = 2s});
  ASSERT_TRUE(held);
  auto writer = c.simple(key("w")).try_acquire();
  ASSERT_TRUE(writer);
  io_runner runner;
  std::promise<void> done;
  bool extended = false, by_id = false, reached_early = true, reached = false;
  std::int64_t left = -1;
  std::error_code zero_permits, empty_lease, write_on_empty;
  fenced_write_result fenced;
  std::vector<reply> written, released_with;
  bool all_on_runner = true;
  asio::co_spawn(
      runner.io,
      [&]() -> asio::awaitable<void> {
        const auto on_runner = [&] { all_on_runner &= std::this_thread::get_id() == runner.id(); };
        extended = co_await dlock::async_extend(held, 60s, asio::use_awaitable);
        on_runner();
        co_await dlock::async_release(sem, 2, asio::use_awaitable);
        on_runner();
        try {
          co_await dlock::async_release(sem, 0, asio::use_awaitable);
        } catch (const std::system_error& e) {
          zero_permits = e.code();
        }
        auto permit = leased.try_acquire({.lease_time = 60s});
        by_id = co_await dlock::async_release(leased, permit.permit_id(), asio::use_awaitable);
        on_runner();
        reached_early = co_await dlock::async_wait(latch, 50ms, asio::use_awaitable);
        left = co_await dlock::async_count_down(latch, asio::use_awaitable);
        on_runner();
        lease empty;
        try {
          co_await dlock::async_extend(empty, 1s, asio::use_awaitable);
        } catch (const std::system_error& e) {
          empty_lease = e.code();
        }
        co_await dlock::async_count_down(latch, asio::use_awaitable);
        reached = co_await dlock::async_wait(latch, 10s, asio::use_awaitable);
        on_runner();
        fenced = co_await dlock::async_fenced_set(c, key("data"), "v", held.fence(),
                                                  asio::use_awaitable);
        on_runner();
        // Named, not braced in the co_await: g++ 12 rejects a braced list there ("array used
        // as initializer").
        const std::vector<std::vector<std::string>> increment = {{"INCR", key("n")}};
        written = co_await dlock::async_write_while_held(writer, increment, asio::use_awaitable);
        on_runner();
        released_with =
            co_await dlock::async_write_and_release(writer, increment, asio::use_awaitable);
        on_runner();
        try {
          co_await dlock::async_write_while_held(writer, increment, asio::use_awaitable);
        } catch (const std::system_error& e) {
          write_on_empty = e.code();
        }
      },
      [&](std::exception_ptr e) {
        EXPECT_FALSE(e);
        done.set_value();
      });
  ASSERT_EQ(done.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(all_on_runner);
  EXPECT_TRUE(extended);
  EXPECT_GT(raw({"PTTL", key("l")}).integer(), 30'000);
  EXPECT_EQ(sem.available(), 2);
  EXPECT_EQ(zero_permits, errc::invalid_argument);
  EXPECT_TRUE(by_id);
  EXPECT_FALSE(reached_early);
  EXPECT_EQ(left, 1);
  EXPECT_EQ(empty_lease, errc::lease_lost);
  EXPECT_TRUE(reached);
  EXPECT_TRUE(fenced.written);
  EXPECT_EQ(raw({"GET", key("data")}).str(), "v");
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0].integer(), 1);
  ASSERT_EQ(released_with.size(), 1u);
  EXPECT_EQ(released_with[0].integer(), 2);
  EXPECT_FALSE(writer) << "async_write_and_release empties the lease";
  EXPECT_EQ(write_on_empty, errc::lease_lost);
  wait_until([&] { return raw({"EXISTS", key("w")}).integer() == 0; });
  EXPECT_TRUE(held.release());
}
#endif  // ASIO_HAS_CO_AWAIT

TEST_F(OneCallAsync, AnAsioLatchWaitIsCancelledThroughItsSlotAndKeepsTheWorkUntilItsHandler) {
  raw_redis raw(server().port());
  client c(url());
  auto latch = c.latch(key("l"));
  ASSERT_TRUE(latch.try_set_count(1));
  asio::io_context io;
  asio::cancellation_signal signal;
  std::optional<std::pair<std::error_code, bool>> got;
  dlock::async_wait(latch, std::chrono::milliseconds::max(),
                    asio::bind_cancellation_slot(
                        signal.slot(), asio::bind_executor(io, [&](std::error_code ec, bool r) {
                          got = {ec, r};
                        })));
  // The signal is emitted from the io_context's own thread once the wait listens (asio's slots
  // are not thread-safe).
  asio::steady_timer poll(io);
  std::function<void()> emit_when_listening = [&] {
    if (latch_waiters(raw, key("l")) >= 1) {
      signal.emit(asio::cancellation_type::terminal);
      return;
    }
    poll.expires_after(1ms);
    poll.async_wait([&](std::error_code) { emit_when_listening(); });
  };
  emit_when_listening();
  io.run_for(30s);  // returns early once the handler has run and with it the last work
  ASSERT_TRUE(got) << "the wait was not cancelled, or run() returned before its handler";
  EXPECT_EQ(got->first, asio::error::operation_aborted);
  EXPECT_FALSE(got->second);
}

// ---- on every deployment ----

class OneCallAsyncTopology : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Deployments, OneCallAsyncTopology, ::testing::ValuesIn(all_deployments),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(OneCallAsyncTopology, ExtendReleaseAndCountDownComplete) {
  auto d = start_deployment(GetParam());
  client c(d->options());
  auto held = c.reentrant("one-call:lock").try_acquire({.lease_time = 2s});
  ASSERT_TRUE(held);
  auto sem = c.semaphore("one-call:sem");
  ASSERT_TRUE(sem.try_set_permits(0));
  auto latch = c.latch("one-call:latch");
  ASSERT_TRUE(latch.try_set_count(1));
  std::promise<called<bool>> extended;
  std::promise<called<void>> released;
  std::promise<called<std::int64_t>> counted;
  held.extend_async(60s, into(extended, c.simple("one-call:p")));
  sem.release_async(2, into(released, c.simple("one-call:p")));
  latch.count_down_async(into(counted, c.simple("one-call:p")));
  auto e = settle(extended.get_future());
  auto r = settle(released.get_future());
  auto n = settle(counted.get_future());
  EXPECT_FALSE(e.result.error) << e.result.message;
  EXPECT_TRUE(e.result.value);
  EXPECT_FALSE(r.result.error) << r.result.message;
  EXPECT_FALSE(n.result.error) << n.result.message;
  EXPECT_EQ(n.result.value, 0);
  EXPECT_EQ(sem.available(), 2);
  EXPECT_TRUE(latch.wait_for(0s));
  raw_redis raw(d->port_for("one-call:lock"));
  EXPECT_GT(raw({"PTTL", "one-call:lock"}).integer(), 30'000);
  EXPECT_TRUE(held.release());
}

}  // namespace
}  // namespace dlock::testing
