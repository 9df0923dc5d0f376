// dlock/asio.hpp against a real redis-server: async_acquire and async_release with the completion
// tokens asio users reach for (callbacks, use_awaitable, deferred, use_future), completions on
// the handler's executor, work tracking, and per-operation cancellation through cancellation
// slots and awaitable operators.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <future>
#include <thread>
#include <variant>

#include "dlock/asio.hpp"
#include "dlock/dlock.hpp"
#include "io_runner.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"

// asio 1.22 has coroutines (asio::awaitable) with GCC's, not with Clang's standard ones.
#if defined(ASIO_HAS_CO_AWAIT)
#include <asio/experimental/awaitable_operators.hpp>
#endif

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

/// How one operation ended, and on which thread its handler ran.
struct acquired {
  std::error_code ec;
  lease held;
  std::thread::id ran_on;
};

class AsioAdapter : public redis_test {};

TEST_F(AsioAdapter, ACallbackRunsOnItsExecutorAndRunDoesNotReturnBeforeIt) {
  client holder(url());
  auto held = holder.simple(key("s")).try_acquire();
  ASSERT_TRUE(held);
  client c(url());
  auto lock = c.simple(key("s"));
  asio::io_context io;
  std::optional<acquired> got;
  dlock::async_acquire(lock, 20s, asio::bind_executor(io, [&](std::error_code ec, lease l) {
                         got = acquired{ec, std::move(l), std::this_thread::get_id()};
                       }));
  // The holder lets go once the waiter listens; meanwhile run() has nothing but the pending
  // acquisition to keep it going.
  std::thread releaser([&] {
    wait_until([&] { return lock.waiting_clients() == 1; });
    held.release();
  });
  io.run();
  releaser.join();
  ASSERT_TRUE(got) << "run() returned before the completion";
  EXPECT_FALSE(got->ec) << got->ec.message();
  EXPECT_TRUE(got->held.valid());
  EXPECT_EQ(got->ran_on, std::this_thread::get_id()) << "not run by the io_context";
  EXPECT_EQ(got->held.release_checked(), release_outcome::released);
}

#if defined(ASIO_HAS_CO_AWAIT)
TEST_F(AsioAdapter, UseAwaitableAcquiresAndReleasesOnTheCoroutinesThread) {
  client c(url());
  auto lock = c.reentrant(key("r"));
  io_runner runner;
  std::promise<void> done;
  bool held_inside = false, released = false;
  std::thread::id ran_on;
  asio::co_spawn(
      runner.io,
      [&]() -> asio::awaitable<void> {
        lease l = co_await dlock::async_acquire(lock, 5s, asio::use_awaitable);
        ran_on = std::this_thread::get_id();
        held_inside = l.valid() && lock.is_locked();  // blocking is fine here: not dlock's thread
        released = co_await dlock::async_release(l, asio::use_awaitable);
        EXPECT_FALSE(l);
      },
      [&](std::exception_ptr e) {
        EXPECT_FALSE(e);
        done.set_value();
      });
  ASSERT_EQ(done.get_future().wait_for(20s), std::future_status::ready);
  EXPECT_TRUE(held_inside);
  EXPECT_TRUE(released);
  EXPECT_EQ(ran_on, runner.id());
  EXPECT_FALSE(lock.is_locked());
}
#endif  // ASIO_HAS_CO_AWAIT

TEST_F(AsioAdapter, ADeferredOperationSendsNothingUntilItIsStarted) {
  client c(url());
  auto lock = c.simple(key("s"));
  io_runner runner;
  auto op = dlock::async_acquire(lock, 5s, asio::experimental::deferred);
  EXPECT_EQ(c.stats().attempts, 0u);
  std::promise<acquired> got;
  std::move(op)(asio::bind_executor(runner.io, [&](std::error_code ec, lease l) {
    got.set_value({ec, std::move(l), std::this_thread::get_id()});
  }));
  auto r = got.get_future().get();
  EXPECT_FALSE(r.ec);
  EXPECT_TRUE(r.held.valid());
  EXPECT_EQ(r.ran_on, runner.id());
  // And a deferred release.
  std::promise<bool> released;
  dlock::async_release(r.held, asio::experimental::deferred)(
      [&](std::error_code, bool ok) { released.set_value(ok); });
  EXPECT_TRUE(released.get_future().get());
}

TEST_F(AsioAdapter, UseFutureYieldsTheLease) {
  client c(url());
  std::future<lease> granted = dlock::async_acquire(c.simple(key("s")), 5s, asio::use_future);
  auto l = granted.get();
  EXPECT_TRUE(l.valid());
  std::future<bool> released = dlock::async_release(l, asio::use_future);
  EXPECT_TRUE(released.get());
  lease empty;
  EXPECT_FALSE(dlock::async_release(empty, asio::use_future).get());
}

#if defined(ASIO_HAS_CO_AWAIT)
// (Thrown on the coroutine's own thread: an exception handed between threads through a
// std::future is a false report under TSan, whose view misses libstdc++'s own reference counts.)
TEST_F(AsioAdapter, UseAwaitableThrowsTheDlockCodeAsASystemError) {
  client c(url());
  auto lock = c.simple(key("s"));
  io_runner runner;
  std::promise<std::error_code> thrown;
  asio::co_spawn(
      runner.io,
      [&]() -> asio::awaitable<void> {
        const lease_options bad{.lease_time = -1s};
        try {
          co_await dlock::async_acquire(lock, 5s, asio::use_awaitable, bad);
          thrown.set_value({});
        } catch (const std::system_error& e) {
          thrown.set_value(e.code());
        }
      },
      asio::detached);
  EXPECT_EQ(thrown.get_future().get(), errc::invalid_argument);
  EXPECT_EQ(c.stats().attempts, 0u);
}
#endif  // ASIO_HAS_CO_AWAIT

#if defined(ASIO_HAS_CO_AWAIT)
TEST_F(AsioAdapter, AWaitThatEndsWhileSuspendedYieldsAnEmptyLease) {
  client holder(url());
  auto held = holder.simple(key("s")).try_acquire();
  ASSERT_TRUE(held);
  client c(url());
  io_runner runner;
  auto lock = c.simple(key("s"));
  std::promise<acquired> got;
  const auto started = steady::now();
  asio::co_spawn(
      runner.io,
      [&]() -> asio::awaitable<void> {
        lease l = co_await dlock::async_acquire(lock, 300ms, asio::use_awaitable);
        got.set_value({{}, std::move(l), std::this_thread::get_id()});
      },
      asio::detached);
  auto r = got.get_future().get();
  EXPECT_GE(steady::now() - started, 300ms);
  EXPECT_FALSE(r.held);
  EXPECT_TRUE(held.valid());
  EXPECT_EQ(lock.waiting_clients(), 0);
}
#endif  // ASIO_HAS_CO_AWAIT

TEST_F(AsioAdapter, ACancellationSignalAbortsTheWaitAndNothingIsGrantedAfterwards) {
  client holder(url());
  auto held = holder.reentrant(key("r")).try_acquire();
  ASSERT_TRUE(held);
  client c(url());
  auto lock = c.reentrant(key("r"));
  io_runner runner;
  asio::cancellation_signal cancel;
  std::promise<acquired> got;
  // Initiated, and later cancelled, on the io_context's thread, as asio's rules for slots ask.
  asio::post(runner.io, [&] {
    dlock::async_acquire(
        lock, 30s,
        asio::bind_cancellation_slot(
            cancel.slot(), asio::bind_executor(runner.io, [&](std::error_code ec, lease l) {
              got.set_value({ec, std::move(l), std::this_thread::get_id()});
            })));
  });
  wait_until([&] { return lock.waiting_clients() == 1; });
  asio::post(runner.io, [&] { cancel.emit(asio::cancellation_type::terminal); });
  auto result = got.get_future();
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  auto r = result.get();
  EXPECT_EQ(r.ec, asio::error::operation_aborted);
  EXPECT_FALSE(r.held);
  EXPECT_EQ(r.ran_on, runner.id());
  ASSERT_TRUE(held.release());
  EXPECT_FALSE(lock.is_locked()) << "granted to the cancelled waiter";
  client third(url());
  EXPECT_TRUE(third.reentrant(key("r")).try_acquire());
}

#if defined(ASIO_HAS_CO_AWAIT)
TEST_F(AsioAdapter, ATimerWinningAnOrCancelsTheAcquisition) {
  using namespace asio::experimental::awaitable_operators;
  client holder(url());
  auto held = holder.simple(key("s")).try_acquire();
  ASSERT_TRUE(held);
  client c(url());
  auto lock = c.simple(key("s"));
  io_runner runner;
  std::promise<std::size_t> winner;
  asio::co_spawn(
      runner.io,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer timer(co_await asio::this_coro::executor, 200ms);
        auto first = co_await (dlock::async_acquire(lock, 30s, asio::use_awaitable) ||
                               timer.async_wait(asio::use_awaitable));
        winner.set_value(first.index());
      },
      asio::detached);
  EXPECT_EQ(winner.get_future().get(), 1u) << "the lock was held elsewhere: the timer wins";
  // The acquisition was cancelled, not left waiting: nothing listens any more, and the holder's
  // release grants nothing to it.
  wait_until([&] { return lock.waiting_clients() == 0; });
  ASSERT_TRUE(held.release());
  EXPECT_FALSE(lock.is_locked());
  EXPECT_EQ(c.stats().grants, 0u);
}
#endif  // ASIO_HAS_CO_AWAIT

}  // namespace
}  // namespace dlock::testing
