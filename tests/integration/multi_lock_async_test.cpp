// Multi-locks without parking a thread: multi_lock::acquire_async with a callback, its C++20
// awaitable and dlock/asio.hpp's async_acquire(multi_lock, ...), against real servers. The
// blocking calls' promises hold (all names or none, one script call when one node and slot hold
// them all, one by one in order otherwise), and so do the asynchronous acquisitions' own rules:
// completions on the I/O thread or the asio handler's executor, cancellation while waiting
// releases what was taken, a wait that runs out keeps nothing, a closing client ends the wait.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/use_awaitable.hpp>
#include <future>
#include <iostream>
#include <random>
#include <stop_token>
#include <thread>

#include "async_support.hpp"
#include "deployments.hpp"
#include "dlock/asio.hpp"
#include "dlock/dlock.hpp"
#include "embedded/redis_cluster.hpp"
#include "io_runner.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

// The overloads stay unambiguous for the calls people write.
template <class M>
concept multi_async_overloads = requires(M m, lease_options o, std::stop_token t,
                                         multi_acquire_callback cb) {
  { m.acquire_async(1s) } -> std::same_as<multi_acquire_awaitable>;
  { m.acquire_async(1s, o) } -> std::same_as<multi_acquire_awaitable>;
  { m.acquire_async(1s, {.lease_time = 1s}) } -> std::same_as<multi_acquire_awaitable>;
  { m.acquire_async(1s, o, t) } -> std::same_as<multi_acquire_awaitable>;
  {
    m.acquire_async(1s, [](multi_acquire_result) {})
    } -> std::same_as<acquire_handle>;
  {
    m.acquire_async(1s, [](multi_acquire_result) {}, {.lease_time = 1s})
    } -> std::same_as<acquire_handle>;
  { m.acquire_async(1s, cb, o) } -> std::same_as<acquire_handle>;
};
static_assert(multi_async_overloads<multi_lock>);

using called = called_back<multi_acquire_result>;

class MultiLockAsync : public redis_test {
 protected:
  std::vector<std::string> names() const { return {key("a"), key("b"), key("c")}; }
  std::int64_t exists(raw_redis& raw) {
    return raw({"EXISTS", key("a"), key("b"), key("c")}).integer();
  }
  /// The names locked, asked through `c`: each query follows, on its name's connection, any
  /// release `c` sent for that name (a release from the I/O thread is not waited for).
  int locked_through(const client& c) {
    int n = 0;
    for (const auto& name : names())
      n += c.reentrant(name).is_locked() ? 1 : 0;
    return n;
  }
};

TEST_F(MultiLockAsync, AFreeSetIsTakenInOneScriptCallAndCompletesOnTheIoThread) {
  raw_redis raw(server().port());
  client c(url());
  std::promise<called> done;
  const auto before = script_calls(raw);
  (void)c.multi(names()).acquire_async(5s, into(done, c.simple(key("p"))));
  auto got = done.get_future().get();
  EXPECT_EQ(script_calls(raw) - before, 1) << "one call takes every name";
  ASSERT_FALSE(got.result.error) << got.result.message;
  ASSERT_TRUE(got.result.held);
  EXPECT_TRUE(got.result.held.valid());
  EXPECT_TRUE(got.on_io_thread);
  ASSERT_EQ(got.result.held.holds().size(), 3u);
  for (const auto& name : names()) {
    EXPECT_EQ(got.result.held.fence(name), c.reentrant(name).fence()) << name;
  }
  EXPECT_TRUE(got.result.held.release());
  EXPECT_EQ(exists(raw), 0);
}

TEST_F(MultiLockAsync, AWaitForAHeldNameEndsWithEveryNameOnceItIsReleased) {
  raw_redis raw(server().port());
  client holder(url());
  auto held = holder.reentrant(key("b")).try_acquire({.lease_time = 120s});
  ASSERT_TRUE(held);
  client c(url());
  std::promise<called> done;
  auto result = done.get_future();
  (void)c.multi(names()).acquire_async(30s, into(done, c.simple(key("p"))));
  // Waiting for b, in order: a is taken (it sorts first), c is not.
  wait_until([&] { return c.reentrant(key("b")).waiting_clients() >= 1; });
  ASSERT_EQ(result.wait_for(0s), std::future_status::timeout) << "granted while b was held";
  EXPECT_EQ(raw({"EXISTS", key("c")}).integer(), 0);
  ASSERT_TRUE(held.release());
  auto got = result.get();
  ASSERT_FALSE(got.result.error) << got.result.message;
  ASSERT_TRUE(got.result.held);
  EXPECT_TRUE(got.on_io_thread);
  EXPECT_EQ(exists(raw), 3);
  EXPECT_TRUE(got.result.held.release());
}

TEST_F(MultiLockAsync, ACancelledWaitReleasesWhatItTookAndAWaitThatRunsOutKeepsNothing) {
  raw_redis raw(server().port());
  client holder(url());
  auto held = holder.reentrant(key("b")).try_acquire({.lease_time = 120s});
  ASSERT_TRUE(held);
  client c(url());
  auto multi = c.multi(names());

  std::promise<called> ran_out;
  const auto started = steady::now();
  (void)multi.acquire_async(300ms, into(ran_out, c.simple(key("p"))));
  auto out = ran_out.get_future().get();
  EXPECT_GE(steady::now() - started, 300ms);
  EXPECT_FALSE(out.result.error) << out.result.message;
  EXPECT_FALSE(out.result.held);
  EXPECT_FALSE(c.reentrant(key("a")).is_locked()) << "a partial hold was kept";

  std::promise<called> cancelled;
  auto result = cancelled.get_future();
  auto handle = multi.acquire_async(30s, into(cancelled, c.simple(key("p"))));
  wait_until([&] { return c.reentrant(key("b")).waiting_clients() >= 1; });
  EXPECT_EQ(raw({"EXISTS", key("a")}).integer(), 1) << "a is taken before b is waited for";
  handle.cancel();
  auto got = result.get();
  EXPECT_EQ(got.result.error, errc::cancelled) << got.result.message;
  EXPECT_FALSE(got.result.held);
  EXPECT_TRUE(got.on_io_thread);
  // a's release was sent before the completion ran, and this query follows it.
  EXPECT_FALSE(c.reentrant(key("a")).is_locked()) << "the name taken before b was kept";
  ASSERT_TRUE(held.release());
  EXPECT_EQ(exists(raw), 0) << "granted to the cancelled acquisition";
}

TEST_F(MultiLockAsync, ArgumentErrorsComeThroughTheCallbackWithNothingSent) {
  raw_redis raw(server().port());
  client c(url());
  const auto before = script_calls(raw);
  std::promise<called> done;
  (void)c.multi(names()).acquire_async(5s, into(done, c.simple(key("p"))), {.lease_time = -1s});
  auto got = done.get_future().get();
  EXPECT_EQ(got.result.error, errc::invalid_argument) << got.result.message;
  EXPECT_FALSE(got.result.held);
  EXPECT_TRUE(got.on_io_thread);
  EXPECT_EQ(script_calls(raw), before);
}

TEST_F(MultiLockAsync, DroppingTheLastClientHandleEndsAPendingWait) {
  client holder(url());
  auto held = holder.reentrant(key("a")).try_acquire({.lease_time = 120s});
  ASSERT_TRUE(held);
  std::promise<std::error_code> ended;
  {
    client c(url());
    (void)c.multi(names()).acquire_async(30s, [&](multi_acquire_result r) {
      ended.set_value(r.held ? std::error_code{} : r.error);
    });
    wait_until([&] { return holder.reentrant(key("a")).waiting_clients() >= 1; });
  }  // the client's last handle goes: the waiting acquisition is told, not left hanging
  auto f = ended.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), errc::client_closed);
  EXPECT_TRUE(held.valid());
}

// Cancellations landing before, during and after the hand-off of a held name (the one-by-one
// path, with a name already taken) and the one call on a free set: every round ends with every
// name held by the multi-lock (delivered) or by nobody, never by a grant nobody knows about.
TEST_F(MultiLockAsync, CancellationsRacingGrantsNeverLeaveANameHeld) {
  raw_redis raw(server().port());
  client holder(url());
  client c(url());
  auto multi = c.multi(names());
  std::mt19937 random(20261124);
  std::uniform_int_distribution<int> release_us(0, 500), cancel_us(0, 1500), call_us(0, 150);
  int granted = 0, cancelled = 0;
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const bool hand_off = round % 2 == 0;
    lease held;
    if (hand_off) {
      held = holder.reentrant(key("b")).try_acquire_for(10s);
      ASSERT_TRUE(held) << "b was not free within 10 s of the last round's end";
    }
    std::promise<multi_acquire_result> done;
    auto handle = multi.acquire_async(
        30s, [&](multi_acquire_result r) { done.set_value(std::move(r)); }, {.lease_time = 60s});
    std::thread releaser;
    if (hand_off) {
      const auto release_after = std::chrono::microseconds(release_us(random));
      releaser = std::thread([&, release_after] {
        spin_for(release_after);
        held.release();
      });
      spin_for(std::chrono::microseconds(cancel_us(random)));
    } else {
      spin_for(std::chrono::microseconds(call_us(random)));
    }
    handle.cancel();
    if (releaser.joinable()) releaser.join();
    auto result = done.get_future();
    ASSERT_EQ(result.wait_for(20s), std::future_status::ready);
    auto r = result.get();
    if (r.held) {
      ++granted;
      EXPECT_FALSE(r.error);
      EXPECT_EQ(r.held.holds().size(), 3u);
      EXPECT_TRUE(r.held.release());
    } else {
      ++cancelled;
      EXPECT_EQ(r.error, errc::cancelled) << r.message;
    }
    // Free again (an undo or a release may still be on its way; a grant that stays fails here).
    wait_until([&] { return exists(raw) == 0; }, 10s);
    if (::testing::Test::HasFatalFailure()) return;
  }
  std::cout << "[          ] " << granted << " rounds granted, " << cancelled << " cancelled\n";
}

// ---- the awaitable ----

struct awaited {
  multi_lease held;
  std::error_code error;
  steady::time_point resumed_at;
};

spawned await_multi(multi_lock multi, std::chrono::milliseconds wait, std::stop_token stop,
                    std::promise<awaited>& done) {
  awaited out;
  try {
    const lease_options options{.lease_time = 60s};
    out.held = co_await multi.acquire_async(wait, options, std::move(stop));
  } catch (const error& e) {
    out.error = e.code();
  }
  out.resumed_at = steady::now();
  done.set_value(std::move(out));
}

TEST_F(MultiLockAsync, ACoroutineGetsEveryNameOrIsStoppedOrItsWaitEndsHoldingNothing) {
  raw_redis raw(server().port());
  client c(url());
  auto multi = c.multi(names());
  {
    std::promise<awaited> done;
    await_multi(multi, 5s, {}, done);
    auto out = done.get_future().get();
    ASSERT_FALSE(out.error) << out.error.message();
    ASSERT_TRUE(out.held);
    EXPECT_EQ(exists(raw), 3);
    EXPECT_TRUE(out.held.release());
  }
  client holder(url());
  auto held = holder.reentrant(key("c")).try_acquire({.lease_time = 120s});
  ASSERT_TRUE(held);
  {
    std::promise<awaited> done;
    const auto started = steady::now();
    await_multi(multi, 300ms, {}, done);
    auto out = done.get_future().get();
    EXPECT_FALSE(out.error) << out.error.message();
    EXPECT_FALSE(out.held);
    EXPECT_GE(out.resumed_at - started, 300ms) << "resumed before its wait was over";
    EXPECT_EQ(locked_through(c), 1) << "only the holder's c";
  }
  {
    std::stop_source stop;
    std::promise<awaited> done;
    auto result = done.get_future();
    await_multi(multi, 30s, stop.get_token(), done);
    wait_until([&] { return c.reentrant(key("c")).waiting_clients() >= 1; });
    stop.request_stop();
    auto out = result.get();
    EXPECT_EQ(out.error, errc::cancelled);
    EXPECT_FALSE(out.held);
    EXPECT_EQ(locked_through(c), 1) << "a or b kept by the stopped acquisition";
  }
  ASSERT_TRUE(held.release());
  EXPECT_EQ(exists(raw), 0);
}

// ---- dlock/asio.hpp ----

#if defined(ASIO_HAS_CO_AWAIT)
TEST_F(MultiLockAsync, AsioUseAwaitableYieldsEveryHold) {
  raw_redis raw(server().port());
  client c(url());
  auto multi = c.multi(names());
  io_runner runner;
  std::promise<void> done;
  std::size_t holds = 0;
  std::int64_t taken = 0;
  asio::co_spawn(
      runner.io,
      [&]() -> asio::awaitable<void> {
        multi_lease held = co_await dlock::async_acquire(multi, 5s, asio::use_awaitable);
        holds = held.holds().size();
        taken = exists(raw);  // not dlock's thread: may block
        held.release();
      },
      [&](std::exception_ptr e) {
        EXPECT_FALSE(e);
        done.set_value();
      });
  ASSERT_EQ(done.get_future().wait_for(20s), std::future_status::ready);
  EXPECT_EQ(holds, 3u);
  EXPECT_EQ(taken, 3);
  EXPECT_EQ(exists(raw), 0);
}
#endif  // ASIO_HAS_CO_AWAIT

TEST_F(MultiLockAsync, AsioHandlerRunsOnItsExecutorAndASlotCancelsTheWait) {
  raw_redis raw(server().port());
  client holder(url());
  auto held = holder.reentrant(key("b")).try_acquire({.lease_time = 120s});
  ASSERT_TRUE(held);
  client c(url());
  auto multi = c.multi(names());
  io_runner runner;
  asio::cancellation_signal cancel;
  struct outcome {
    std::error_code ec;
    multi_lease held;
    std::thread::id ran_on;
  };
  std::promise<outcome> got;
  asio::post(runner.io, [&] {
    dlock::async_acquire(
        multi, 30s,
        asio::bind_cancellation_slot(
            cancel.slot(), asio::bind_executor(runner.io, [&](std::error_code ec, multi_lease l) {
              got.set_value({ec, std::move(l), std::this_thread::get_id()});
            })));
  });
  wait_until([&] { return c.reentrant(key("b")).waiting_clients() >= 1; });
  asio::post(runner.io, [&] { cancel.emit(asio::cancellation_type::terminal); });
  auto r = got.get_future().get();
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_FALSE(r.held);
  EXPECT_EQ(r.ran_on, runner.id());
  EXPECT_FALSE(c.reentrant(key("a")).is_locked()) << "the name taken before b was kept";
  ASSERT_TRUE(held.release());
  EXPECT_EQ(exists(raw), 0) << "granted to the cancelled acquisition";
}

// ---- a cluster: names in different slots, taken one by one ----

TEST(MultiLockAsyncCluster, NamesInDifferentSlotsAreTakenInOrderByTheCallback) {
  auto d = start_deployment("cluster");
  client c(d->options());
  const std::vector<std::string> spread = {"async-multi:x", "async-multi:y", "async-multi:z"};
  ASSERT_NE(embedded::redis_cluster::key_slot(spread[0]),
            embedded::redis_cluster::key_slot(spread[1]));
  client holder(d->options());
  auto held = holder.reentrant(spread[1]).try_acquire({.lease_time = 120s});
  ASSERT_TRUE(held);
  std::promise<called> done;
  auto result = done.get_future();
  const auto before = c.stats().attempts;
  (void)c.multi(spread).acquire_async(30s, into(done, c.simple("async-multi:p")));
  wait_until([&] { return c.reentrant(spread[1]).waiting_clients() >= 1; });
  EXPECT_TRUE(c.reentrant(spread[0]).is_locked());
  EXPECT_FALSE(c.reentrant(spread[2]).is_locked());
  ASSERT_TRUE(held.release());
  auto got = result.get();
  ASSERT_FALSE(got.result.error) << got.result.message;
  ASSERT_TRUE(got.result.held);
  EXPECT_TRUE(got.on_io_thread);
  EXPECT_GE(c.stats().attempts - before, 3u) << "one attempt per name at least";
  for (const auto& name : spread) {
    EXPECT_EQ(got.result.held.fence(name), c.reentrant(name).fence()) << name;
  }
  EXPECT_TRUE(got.result.held.release());
}

}  // namespace
}  // namespace dlock::testing
