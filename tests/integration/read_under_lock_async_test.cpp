// Acquiring a lock and reading under it without parking a thread: the callback form of
// basic_lock::acquire_and_read_async, its C++20 awaitable, and dlock/asio.hpp's
// async_acquire_and_read, against real servers. What the blocking form promises holds here too
// (one round trip on a free lock, the holder's writes seen, argument errors before anything is
// sent), and so do the asynchronous acquisitions' own rules: completions on the I/O thread (or
// the asio handler's executor), cancellation while waiting holding nothing, a wait that ends
// while suspended.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/bind_executor.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/use_awaitable.hpp>
#include <future>
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
using steady = std::chrono::steady_clock;
using reads_t = std::vector<std::vector<std::string>>;

// The overloads stay unambiguous for the calls people write.
template <class L>
concept read_async_overloads = requires(L l, reads_t r, lease_options o, std::stop_token t,
                                        acquire_and_read_callback cb) {
  { l.acquire_and_read_async(1s, r) } -> std::same_as<acquire_and_read_awaitable>;
  { l.acquire_and_read_async(1s, {{"GET", "k"}}) } -> std::same_as<acquire_and_read_awaitable>;
  { l.acquire_and_read_async(1s, r, o) } -> std::same_as<acquire_and_read_awaitable>;
  {
    l.acquire_and_read_async(1s, r, {.lease_time = 1s})
    } -> std::same_as<acquire_and_read_awaitable>;
  { l.acquire_and_read_async(1s, r, o, t) } -> std::same_as<acquire_and_read_awaitable>;
  {
    l.acquire_and_read_async(1s, r, [](acquire_and_read_result) {})
    } -> std::same_as<acquire_handle>;
  {
    l.acquire_and_read_async(1s, r, [](acquire_and_read_result) {}, {.lease_time = 1s})
    } -> std::same_as<acquire_handle>;
  { l.acquire_and_read_async(1s, r, cb, o) } -> std::same_as<acquire_handle>;
};
static_assert(read_async_overloads<reentrant_lock> && read_async_overloads<simple_lock>);

/// A string reply's text; anything else shown as such.
std::string text(const reply& r) {
  return r.is_string() ? r.str() : "<not a string: " + r.to_string() + ">";
}

using called = called_back<acquire_and_read_result>;

// ---- the callback form ----

class ReadUnderLockAsync : public redis_test {};

TEST_F(ReadUnderLockAsync, AFreeLocksLeaseAndReadsComeInOneRoundTripOnTheIoThread) {
  raw_redis raw(server().port());
  raw({"HSET", key("funds"), "f", "100"});
  client c(url());
  std::promise<called> done;
  const auto before = script_calls(raw);
  (void)c.simple(key("lock"))
      .acquire_and_read_async(5s, {{"HGET", key("funds"), "f"}, {"GET", key("absent")}},
                              into(done, c.simple(key("p"))));
  auto got = done.get_future().get();
  EXPECT_EQ(script_calls(raw) - before, 2) << "the acquire script and one read script";
  ASSERT_FALSE(got.result.error) << got.result.message;
  ASSERT_TRUE(got.result.held.valid());
  EXPECT_TRUE(got.on_io_thread);
  ASSERT_EQ(got.result.reads.size(), 2u);
  EXPECT_EQ(text(got.result.reads[0]), "100");
  EXPECT_TRUE(got.result.reads[1].is_nil());
  EXPECT_EQ(got.result.held.release_checked(), release_outcome::released);
}

TEST_F(ReadUnderLockAsync, AWaitingCallbackReadsWhatTheHolderWroteBeforeItReleased) {
  raw_redis raw(server().port());
  raw({"SET", key("data"), "1"});
  client holder(url());
  auto held = holder.reentrant(key("lock")).try_acquire({.lease_time = 120s});
  ASSERT_TRUE(held);
  client c(url());
  std::promise<called> done;
  auto result = done.get_future();
  (void)c.reentrant(key("lock"))
      .acquire_and_read_async(30s, {{"GET", key("data")}}, into(done, c.simple(key("p"))));
  wait_until([&] { return holder.reentrant(key("lock")).waiting_clients() >= 1; });
  ASSERT_EQ(result.wait_for(0s), std::future_status::timeout) << "granted while held";
  raw({"SET", key("data"), "2"});
  ASSERT_TRUE(held.release());
  auto got = result.get();
  ASSERT_FALSE(got.result.error) << got.result.message;
  ASSERT_TRUE(got.result.held);
  ASSERT_EQ(got.result.reads.size(), 1u);
  EXPECT_EQ(text(got.result.reads[0]), "2") << "read under the lock, after the holder's write";
  EXPECT_TRUE(got.on_io_thread);
}

TEST_F(ReadUnderLockAsync, ArgumentErrorsComeThroughTheCallbackWithNothingSent) {
  raw_redis raw(server().port());
  client c(url());
  const auto before = script_calls(raw);
  struct bad_call {
    const char* what;
    basic_lock lock;
    reads_t reads;
    lease_options options;
  };
  const std::vector<bad_call> calls = {
      {"an empty command", c.simple(key("lock")), {{"GET", key("d")}, {}}, {}},
      {"an empty command name", c.reentrant(key("lock")), {{"", key("d")}}, {}},
      {"a semaphore", c.semaphore(key("sem")), {{"GET", key("d")}}, {}},
      {"a negative lease time", c.simple(key("lock")), {{"GET", key("d")}}, {.lease_time = -1s}},
  };
  for (const auto& call : calls) {
    SCOPED_TRACE(call.what);
    std::promise<called> done;
    auto lock = call.lock;
    (void)lock.acquire_and_read_async(5s, call.reads, into(done, c.simple(key("p"))), call.options);
    auto got = done.get_future().get();
    EXPECT_EQ(got.result.error, errc::invalid_argument) << got.result.message;
    EXPECT_FALSE(got.result.message.empty());
    EXPECT_FALSE(got.result.held);
    EXPECT_TRUE(got.on_io_thread);
  }
  EXPECT_EQ(script_calls(raw), before) << "a script ran for a refused call";
  EXPECT_EQ(raw({"EXISTS", key("lock"), key("sem")}).integer(), 0);
}

TEST_F(ReadUnderLockAsync, ACancelledWaitEndsHoldingNothingAndAWaitThatRunsOutGivesNothing) {
  client holder(url());
  auto held = holder.fair(key("lock")).try_acquire({.lease_time = 120s});
  ASSERT_TRUE(held);
  client c(url());
  auto lock = c.fair(key("lock"));

  std::promise<called> ran_out;
  const auto started = steady::now();
  (void)lock.acquire_and_read_async(200ms, {{"GET", key("data")}},
                                    into(ran_out, c.simple(key("p"))));
  auto out = ran_out.get_future().get();
  EXPECT_GE(steady::now() - started, 200ms);
  EXPECT_FALSE(out.result.error) << out.result.message;
  EXPECT_FALSE(out.result.held);
  EXPECT_TRUE(out.result.reads.empty());

  std::promise<called> cancelled;
  auto result = cancelled.get_future();
  auto handle =
      lock.acquire_and_read_async(30s, {{"GET", key("data")}}, into(cancelled, c.simple(key("p"))));
  wait_until([&] { return !lock.info().queue.empty(); });
  handle.cancel();
  auto got = result.get();
  EXPECT_EQ(got.result.error, errc::cancelled) << got.result.message;
  EXPECT_FALSE(got.result.held);
  EXPECT_TRUE(lock.info().queue.empty()) << "its place in the fair queue was not given back";
  ASSERT_TRUE(held.release());
  EXPECT_FALSE(lock.is_locked()) << "granted to the cancelled waiter";
}

// Started from a completion, on the I/O thread, the acquisition starts by a post; the reads
// must still follow its first attempt and run once.
TEST_F(ReadUnderLockAsync, StartedOnTheIoThreadTheReadsStillFollowTheFirstAttempt) {
  raw_redis raw(server().port());
  raw({"SET", key("data"), "v"});
  client c(url());
  auto first = c.simple(key("first"));
  auto second = c.simple(key("second"));
  std::promise<called> done;
  const auto before = script_calls(raw);
  (void)first.acquire_async(5s, [&](acquire_result r) {
    r.held.release();  // on the I/O thread: sent without waiting
    (void)second.acquire_and_read_async(5s, {{"GET", key("data")}}, into(done, c.simple(key("p"))));
  });
  auto got = done.get_future().get();
  wait_until([&] { return !first.is_locked(); });
  const auto calls = script_calls(raw) - before;
  ASSERT_FALSE(got.result.error) << got.result.message;
  ASSERT_TRUE(got.result.held);
  ASSERT_EQ(got.result.reads.size(), 1u);
  EXPECT_EQ(text(got.result.reads[0]), "v");
  EXPECT_EQ(calls, 4) << "the first lock's acquire and release, the second's acquire and one "
                         "read script, nothing re-run";
  EXPECT_TRUE(got.result.held.release());
}

// ---- the awaitable ----

struct awaited {
  lease_and_reads got;
  std::error_code error;
  steady::time_point resumed_at;
};

spawned await_reads(basic_lock lock, std::chrono::milliseconds wait, reads_t reads,
                    std::stop_token stop, std::promise<awaited>& done) {
  awaited out;
  try {
    const lease_options options{.lease_time = 60s};
    auto acquiring = lock.acquire_and_read_async(wait, std::move(reads), options, std::move(stop));
    out.got = co_await acquiring;
  } catch (const error& e) {
    out.error = e.code();
  }
  out.resumed_at = steady::now();
  done.set_value(std::move(out));
}

TEST_F(ReadUnderLockAsync, ACoroutineGetsTheLeaseAndTheReads) {
  raw_redis raw(server().port());
  raw({"SET", key("a"), "1"});
  client c(url());
  std::promise<awaited> done;
  await_reads(c.reentrant(key("lock")), 5s, {{"GET", key("a")}, {"HGET", key("a"), "f"}}, {}, done);
  auto out = done.get_future().get();
  ASSERT_FALSE(out.error) << out.error.message();
  auto& got = out.got;
  ASSERT_TRUE(got.held.valid());
  ASSERT_EQ(got.reads.size(), 2u);
  EXPECT_EQ(text(got.reads[0]), "1");
  EXPECT_TRUE(got.reads[1].is_error()) << "a wrong type takes its read's place";
  EXPECT_TRUE(c.reentrant(key("lock")).is_locked());
  EXPECT_EQ(got.held.release_checked(), release_outcome::released);
}

TEST_F(ReadUnderLockAsync,
       ACoroutineStoppedWhileSuspendedHoldsNothingAndOneWhoseWaitEndsGetsNothing) {
  client holder(url());
  auto held = holder.simple(key("lock")).try_acquire({.lease_time = 120s});
  ASSERT_TRUE(held);
  client c(url());
  auto lock = c.simple(key("lock"));

  std::promise<awaited> ran_out;
  const auto started = steady::now();
  await_reads(lock, 300ms, {{"GET", key("d")}}, {}, ran_out);
  auto out = ran_out.get_future().get();
  EXPECT_FALSE(out.error) << out.error.message();
  EXPECT_FALSE(out.got.held);
  EXPECT_TRUE(out.got.reads.empty());
  EXPECT_GE(out.resumed_at - started, 300ms) << "resumed before its wait was over";

  std::stop_source stop;
  std::promise<awaited> stopped;
  auto result = stopped.get_future();
  await_reads(lock, 30s, {{"GET", key("d")}}, stop.get_token(), stopped);
  wait_until([&] { return lock.waiting_clients() == 1; });
  stop.request_stop();
  auto got = result.get();
  EXPECT_EQ(got.error, errc::cancelled);
  EXPECT_FALSE(got.got.held);
  ASSERT_TRUE(held.release());
  EXPECT_FALSE(lock.is_locked()) << "granted to the stopped waiter";
}

// ---- dlock/asio.hpp ----

struct asio_outcome {
  std::error_code ec;
  lease_and_reads got;
  std::thread::id ran_on;
};

TEST_F(ReadUnderLockAsync, AsioHandlersRunOnTheirExecutorAndASlotCancelsTheWait) {
  raw_redis raw(server().port());
  raw({"SET", key("data"), "v"});
  client c(url());
  auto lock = c.simple(key("lock"));
  io_runner runner;

  // A deferred operation sends nothing until it is started.
  auto op =
      dlock::async_acquire_and_read(lock, 5s, {{"GET", key("data")}}, asio::experimental::deferred);
  EXPECT_EQ(c.stats().attempts, 0u);
  std::promise<asio_outcome> granted;
  std::move(op)(asio::bind_executor(runner.io, [&](std::error_code ec, lease_and_reads got) {
    granted.set_value({ec, std::move(got), std::this_thread::get_id()});
  }));
  auto first = granted.get_future().get();
  ASSERT_FALSE(first.ec) << first.ec.message();
  ASSERT_TRUE(first.got.held);
  ASSERT_EQ(first.got.reads.size(), 1u);
  EXPECT_EQ(text(first.got.reads[0]), "v");
  EXPECT_EQ(first.ran_on, runner.id());

  // Held now; a second waiter is cancelled through its slot.
  asio::cancellation_signal cancel;
  std::promise<asio_outcome> aborted;
  asio::post(runner.io, [&] {
    dlock::async_acquire_and_read(
        lock, 30s, {{"GET", key("data")}},
        asio::bind_cancellation_slot(
            cancel.slot(),
            asio::bind_executor(runner.io, [&](std::error_code ec, lease_and_reads got) {
              aborted.set_value({ec, std::move(got), std::this_thread::get_id()});
            })));
  });
  wait_until([&] { return lock.waiting_clients() == 1; });
  asio::post(runner.io, [&] { cancel.emit(asio::cancellation_type::terminal); });
  auto second = aborted.get_future().get();
  EXPECT_EQ(second.ec, asio::error::operation_aborted);
  EXPECT_FALSE(second.got.held);
  EXPECT_EQ(second.ran_on, runner.id());
  ASSERT_TRUE(first.got.held.release());
  EXPECT_FALSE(lock.is_locked()) << "granted to the cancelled waiter";
}

#if defined(ASIO_HAS_CO_AWAIT)
TEST_F(ReadUnderLockAsync, AsioUseAwaitableYieldsTheLeaseAndTheReadsOrThrowsTheCode) {
  raw_redis raw(server().port());
  raw({"SET", key("data"), "v"});
  client c(url());
  auto lock = c.simple(key("lock"));
  io_runner runner;
  std::promise<void> done;
  std::string read;
  bool held_inside = false;
  std::error_code refused;
  asio::co_spawn(
      runner.io,
      [&]() -> asio::awaitable<void> {
        // Named, not braced inside the co_await (GCC 12; see basic_lock::acquire_async).
        const reads_t reads = {{"GET", key("data")}}, empty_command = {{}};
        auto got = co_await dlock::async_acquire_and_read(lock, 5s, reads, asio::use_awaitable);
        held_inside = got.held.valid() && lock.is_locked();  // not dlock's thread: may block
        read = got.reads.empty() ? "" : text(got.reads[0]);
        co_await dlock::async_release(got.held, asio::use_awaitable);
        try {
          co_await dlock::async_acquire_and_read(lock, 5s, empty_command, asio::use_awaitable);
        } catch (const std::system_error& e) {
          refused = e.code();
        }
      },
      [&](std::exception_ptr e) {
        EXPECT_FALSE(e);
        done.set_value();
      });
  ASSERT_EQ(done.get_future().wait_for(20s), std::future_status::ready);
  EXPECT_TRUE(held_inside);
  EXPECT_EQ(read, "v");
  EXPECT_EQ(refused, errc::invalid_argument);
  EXPECT_FALSE(lock.is_locked());
}
#endif  // ASIO_HAS_CO_AWAIT

// ---- on every deployment ----

class ReadUnderLockAsyncTopology : public ::testing::TestWithParam<std::string> {};

INSTANTIATE_TEST_SUITE_P(Deployments, ReadUnderLockAsyncTopology,
                         ::testing::ValuesIn(all_deployments),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(ReadUnderLockAsyncTopology, ACallbackGetsTheReadsOfAFreeLockInOneRoundTrip) {
  auto d = start_deployment(GetParam());
  const std::string name = "{async-read}lock", data = "{async-read}data";
  raw_redis raw(d->port_for(name));
  raw({"SET", data, "v"});
  client c(d->options());
  std::promise<called> done;
  const auto before = script_calls(raw);
  (void)c.reentrant(name).acquire_and_read_async(5s, {{"GET", data}},
                                                 into(done, c.simple("{async-read}p")));
  auto got = done.get_future().get();
  EXPECT_EQ(script_calls(raw) - before, 2);
  ASSERT_FALSE(got.result.error) << got.result.message;
  ASSERT_TRUE(got.result.held);
  ASSERT_EQ(got.result.reads.size(), 1u);
  EXPECT_EQ(text(got.result.reads[0]), "v");
  EXPECT_TRUE(got.result.held.release());
}

}  // namespace
}  // namespace dlock::testing
