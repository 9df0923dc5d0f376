// A read hold's upgrade to a write hold without parking a thread: read_lock::upgrade_async with a
// callback, its C++20 awaitable and dlock/asio.hpp's async_upgrade, against a real server. The
// blocking upgrade's promises hold (it waits for the other readers, new readers wait behind it,
// a second upgrader is refused rather than deadlocked), and so do the asynchronous forms' own:
// completion on the I/O thread, errors through the callback with nothing sent, cancellation that
// hands the upgrade's place back.
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/use_awaitable.hpp>
#include <future>
#include <stop_token>

#include "async_support.hpp"
#include "dlock/asio.hpp"
#include "dlock/dlock.hpp"
#include "io_runner.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

using called = called_back<acquire_result>;

class UpgradeAsync : public redis_test {
 protected:
  std::string intent() const {
    std::string out(1, '{');  // not "{" + ...: GCC 12's -Wrestrict misfires on it
    out.append(key("u")).append("}:write_intent");
    return out;
  }
};

TEST_F(UpgradeAsync, ACallbackUpgradeWaitsForTheOtherReaderAndARivalIsRefused) {
  raw_redis raw(server().port());
  client a(url()), b(url());
  auto reads_a = a.read_write(key("u")).read();
  auto reads_b = b.read_write(key("u")).read();
  auto ra = reads_a.try_acquire();
  auto rb = reads_b.try_acquire();
  ASSERT_TRUE(ra && rb);
  std::promise<called> done;
  auto upgraded = done.get_future();
  (void)reads_a.upgrade_async(ra, 30s, into(done, a.simple(key("p"))));
  wait_until([&] { return raw({"EXISTS", intent()}).integer() == 1; });
  client newcomer(url());  // b's own thread would re-enter its read hold, which may go on
  EXPECT_FALSE(newcomer.read_write(key("u")).read().try_acquire()) << "new readers wait";
  std::promise<called> rival;
  (void)reads_b.upgrade_async(rb, 5s, into(rival, b.simple(key("p"))));
  auto refused = settle(rival.get_future());
  EXPECT_EQ(refused.result.error, errc::upgrade_conflict) << refused.result.message;
  EXPECT_TRUE(refused.on_io_thread);
  ASSERT_EQ(upgraded.wait_for(0s), std::future_status::timeout) << "upgraded past a reader";
  rb.release();
  auto got = settle(std::move(upgraded));
  ASSERT_FALSE(got.result.error) << got.result.message;
  ASSERT_TRUE(got.result.held);
  EXPECT_TRUE(got.on_io_thread);
  EXPECT_EQ(raw({"HGET", key("u"), "mode"}).str(), "write");
  EXPECT_TRUE(got.result.held.release());
  EXPECT_TRUE(ra.release());
  EXPECT_EQ(raw({"EXISTS", key("u")}).integer(), 0);
}

TEST_F(UpgradeAsync, WhatIsNotALiveReadHoldIsRefusedThroughTheCallbackWithNothingSent) {
  raw_redis raw(server().port());
  client c(url());
  auto reads = c.read_write(key("u")).read();
  auto other = c.read_write(key("other")).read().try_acquire();
  auto mutex = c.reentrant(key("m")).try_acquire();
  ASSERT_TRUE(other && mutex);
  const auto calls = script_calls(raw);
  for (const lease* hold : {&other, &mutex}) {
    std::promise<called> done;
    (void)reads.upgrade_async(*hold, 5s, into(done, c.simple(key("p"))));
    auto got = settle(done.get_future());
    EXPECT_EQ(got.result.error, errc::invalid_argument);
    EXPECT_TRUE(got.on_io_thread) << "reported as every outcome is";
  }
  lease empty;
  std::promise<called> done;
  (void)reads.upgrade_async(empty, 5s, into(done, c.simple(key("p"))));
  EXPECT_EQ(settle(done.get_future()).result.error, errc::invalid_argument);
  EXPECT_EQ(script_calls(raw), calls);
}

TEST_F(UpgradeAsync, ACancelledUpgradeHandsItsPlaceBackAndHoldsNothing) {
  raw_redis raw(server().port());
  client a(url()), b(url());
  auto reads_a = a.read_write(key("u")).read();
  auto ra = reads_a.try_acquire();
  auto rb = b.read_write(key("u")).read().try_acquire();
  ASSERT_TRUE(ra && rb);
  std::promise<called> done;
  auto handle =
      reads_a.upgrade_async(ra, std::chrono::milliseconds::max(), into(done, a.simple(key("p"))));
  wait_until([&] { return raw({"EXISTS", intent()}).integer() == 1; });
  handle.cancel();
  auto got = settle(done.get_future());
  EXPECT_EQ(got.result.error, errc::cancelled);
  EXPECT_FALSE(got.result.held);
  // The intent is handed back: new readers go on, and the read holds are as they were.
  wait_until([&] { return raw({"EXISTS", intent()}).integer() == 0; });
  client newcomer(url());
  EXPECT_TRUE(newcomer.read_write(key("u")).read().try_acquire());
  EXPECT_EQ(raw({"HGET", key("u"), "mode"}).str(), "read");
  EXPECT_TRUE(ra.valid());
}

spawned upgrade_in_coroutine(read_lock reads, std::stop_token stop, std::promise<lease>& read_out,
                             std::promise<std::pair<lease, std::error_code>>& done) {
  std::error_code ec;
  lease write;
  try {
    auto acquiring = reads.acquire_async(5s);
    lease read = co_await acquiring;
    auto upgrading = reads.upgrade_async(read, 30s, stop);
    write = co_await upgrading;
    read_out.set_value(std::move(read));
  } catch (const error& e) {
    ec = e.code();
    read_out.set_value(lease{});
  }
  done.set_value({std::move(write), ec});
}

TEST_F(UpgradeAsync, AnAwaitedUpgradeYieldsTheWriteLeaseAndAStopTokenCancelsIt) {
  raw_redis raw(server().port());
  client c(url());
  auto reads = c.read_write(key("u")).read();
  {
    std::promise<lease> read;
    std::promise<std::pair<lease, std::error_code>> done;
    upgrade_in_coroutine(reads, {}, read, done);
    auto [write, ec] = settle(done.get_future());
    auto read_hold = settle(read.get_future());
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(write);
    EXPECT_EQ(raw({"HGET", key("u"), "mode"}).str(), "write");
    EXPECT_TRUE(write.release());
    EXPECT_TRUE(read_hold.release());
  }
  // Another reader stays: the upgrade waits until its stop token ends it.
  client other(url());
  auto stays = other.read_write(key("u")).read().try_acquire();
  ASSERT_TRUE(stays);
  std::stop_source stop;
  std::promise<lease> read;
  std::promise<std::pair<lease, std::error_code>> done;
  upgrade_in_coroutine(reads, stop.get_token(), read, done);
  auto outcome = done.get_future();
  wait_until([&] { return raw({"EXISTS", intent()}).integer() == 1; });
  ASSERT_EQ(outcome.wait_for(0s), std::future_status::timeout);
  stop.request_stop();
  auto [write, ec] = settle(std::move(outcome));
  EXPECT_EQ(ec, errc::cancelled);
  EXPECT_FALSE(write);
  wait_until([&] { return raw({"EXISTS", intent()}).integer() == 0; });
}

#if defined(ASIO_HAS_CO_AWAIT)
TEST_F(UpgradeAsync, AsioUpgradesOnTheCoroutinesThread) {
  raw_redis raw(server().port());
  client c(url());
  auto reads = c.read_write(key("u")).read();
  io_runner runner;
  std::promise<void> done;
  bool upgraded = false, on_runner = false;
  std::error_code empty_hold;
  asio::co_spawn(
      runner.io,
      [&]() -> asio::awaitable<void> {
        auto read = reads.try_acquire();
        lease write = co_await dlock::async_upgrade(reads, read, 10s, asio::use_awaitable);
        on_runner = std::this_thread::get_id() == runner.id();
        upgraded = write && raw({"HGET", key("u"), "mode"}).str() == "write";
        write.release();
        read.release();
        lease empty;
        try {
          co_await dlock::async_upgrade(reads, empty, 10s, asio::use_awaitable);
        } catch (const std::system_error& e) {
          empty_hold = e.code();
        }
      },
      [&](std::exception_ptr e) {
        EXPECT_FALSE(e);
        done.set_value();
      });
  ASSERT_EQ(done.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(upgraded);
  EXPECT_TRUE(on_runner);
  EXPECT_EQ(empty_hold, errc::invalid_argument);
  EXPECT_EQ(raw({"EXISTS", key("u")}).integer(), 0);
}
#endif  // ASIO_HAS_CO_AWAIT

}  // namespace
}  // namespace dlock::testing
