// Writing under a lease (lease::write_while_held, write_and_release, and their asynchronous
// forms): the writes run only while the lease still holds the lock on the server, in the same
// atomic step as that check, so a lease lost on the server (expired and taken, deleted,
// force-unlocked) writes nothing even while its holder still believes in it; the release goes
// right behind the writes in one send; errors take their write's place as in MULTI/EXEC; misuse
// is refused before anything is sent, leaving the lease as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>

#include "async_support.hpp"
#include "deployment_test.hpp"
#include "dlock/dlock.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using writes_t = std::vector<std::vector<std::string>>;

/// The error `f` throws, or a test failure if it throws none.
template <class F>
errc thrown_by(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return static_cast<errc>(e.code().value());
  }
  ADD_FAILURE() << "nothing thrown";
  return errc{};
}

// ---- on every deployment ----

class WriteUnderLockTopology : public deployment_test {};

INSTANTIATE_TEST_SUITE_P(Deployments, WriteUnderLockTopology, ::testing::ValuesIn(all_deployments),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(WriteUnderLockTopology, WritesLandWhileHeldAndTheReleaseFollowsThem) {
  const auto lock_name = tagged("k", "lock");
  const auto data = tagged("k", "data");
  const auto funds = tagged("k", "funds");
  auto raw = raw_for(lock_name);
  raw({"HSET", funds, "f", "100"});
  client c(d().options());
  auto lock = c.simple(lock_name);
  auto held = lock.try_acquire();
  ASSERT_TRUE(held);

  const auto written = held.write_while_held({{"SET", data, "a"}, {"HINCRBY", funds, "f", "-30"}});
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(text(written[0]), "OK");
  EXPECT_EQ(written[1].integer(), 70);
  EXPECT_TRUE(held.valid()) << "still held after writing";
  EXPECT_EQ(raw({"EXISTS", lock_name}).integer(), 1);

  // A key outside the lock's slot: the server's error in its place on a cluster, written
  // elsewhere; the writes around it land either way.
  const auto elsewhere = tagged("elsewhere", "data");
  const auto last = held.write_and_release(
      {{"SET", data, "b"}, {"SET", elsewhere, "far"}, {"HINCRBY", funds, "f", "-30"}});
  EXPECT_FALSE(held) << "the lease is empty after write_and_release";
  ASSERT_EQ(last.size(), 3u);
  EXPECT_EQ(text(last[0]), "OK");
  if (GetParam() == "cluster") {
    EXPECT_TRUE(last[1].is_error()) << last[1].to_string();
  } else {
    EXPECT_EQ(text(last[1]), "OK");
  }
  EXPECT_EQ(last[2].integer(), 40);
  EXPECT_EQ(text(raw({"GET", data})), "b");
  // The release was sent behind the writes and not waited for.
  wait_until([&] { return raw({"EXISTS", lock_name}).integer() == 0; });
  EXPECT_TRUE(lock.try_acquire()) << "free again";
}

// ---- standalone ----

class WriteUnderLock : public redis_test {
 protected:
  client make_client() { return client(client_options::from_url(url())); }
};

// The holder still thinks it holds the lock (a watchdog lease, valid by its clock), but on the
// server it expired and another client took it: what a paused or cut-off holder faces. Its
// writes must not land, it must learn the lease is lost, and its release must not free the
// other client's lock.
TEST_F(WriteUnderLock, ALeaseLostOnTheServerWritesNothingAndIsSignalled) {
  raw_redis raw(server().port());
  raw({"SET", key("data"), "orig"});
  for (const bool and_release : {false, true}) {
    SCOPED_TRACE(and_release ? "write_and_release" : "write_while_held");
    auto c = make_client();
    std::atomic<int> lost{0};
    auto held = c.simple(key("lock")).try_acquire({.on_lost = [&](lease_lost_reason) { ++lost; }});
    ASSERT_TRUE(held);
    // Its lease runs out on the server, and another client takes the lock.
    raw({"DEL", key("lock")});
    auto other_client = make_client();
    auto other = other_client.simple(key("lock")).try_acquire({.lease_time = 120s});
    ASSERT_TRUE(other);
    ASSERT_TRUE(held.valid()) << "the holder has not noticed yet";

    const writes_t writes = {{"SET", key("data"), "stale"}, {"DEL", key("data")}};
    EXPECT_EQ(thrown_by([&] {
                and_release ? held.write_and_release(writes) : held.write_while_held(writes);
              }),
              errc::lease_lost);
    EXPECT_EQ(text(raw({"GET", key("data")})), "orig") << "a lost lease wrote";
    if (and_release) {
      EXPECT_FALSE(held) << "emptied, as a release does";
      EXPECT_EQ(lost.load(), 0) << "a lease let go is not signalled as lost";
    } else {
      EXPECT_TRUE(held) << "still a lease, now a lost one";
      EXPECT_FALSE(held.valid());
      EXPECT_EQ(held.lost_reason(), lease_lost_reason::not_held);
      EXPECT_TRUE(held.stop_token().stop_requested());
      EXPECT_EQ(lost.load(), 1);
      // Known lost now: refused without asking the server again.
      const auto before = script_calls(raw);
      EXPECT_EQ(thrown_by([&] { held.write_while_held(writes); }), errc::lease_lost);
      EXPECT_EQ(script_calls(raw), before);
      // write_and_release lets go of a lease known lost, as a release does.
      EXPECT_EQ(thrown_by([&] { held.write_and_release(writes); }), errc::lease_lost);
      EXPECT_FALSE(held) << "emptied";
      EXPECT_EQ(script_calls(raw), before);
    }
    // Whatever went behind the writes, the other client's lock is untouched.
    EXPECT_TRUE(other.valid());
    EXPECT_EQ(raw({"EXISTS", key("lock")}).integer(), 1);
    EXPECT_TRUE(other.release());
    raw({"SET", key("data"), "orig"});
  }
}

// A fixed lease that ran out on the server (the holder stalled past it; no watchdog to renew it)
// and was taken: the holder's late writes do not land, whichever side notices first.
TEST_F(WriteUnderLock, AnExpiredFixedLeaseWritesNothingAfterAnotherTookTheLock) {
  raw_redis raw(server().port());
  auto c = make_client();
  auto held = c.simple(key("lock")).try_acquire({.lease_time = 200ms});
  ASSERT_TRUE(held);
  auto other_client = make_client();
  auto other = other_client.simple(key("lock")).try_acquire_for(10s, {.lease_time = 120s});
  ASSERT_TRUE(other) << "the first lease should have expired on the server";
  EXPECT_EQ(thrown_by([&] {
              held.write_while_held({{"SET", key("data"), "late"}});
            }),
            errc::lease_lost);
  EXPECT_EQ(raw({"EXISTS", key("data")}).integer(), 0);
  EXPECT_TRUE(other.valid());
}

TEST_F(WriteUnderLock, WritesTheServerRefusesGiveTheirErrorInPlaceAndUndoNothing) {
  raw_redis raw(server().port());
  raw({"RPUSH", key("list"), "a"});
  auto c = make_client();
  auto held = c.simple(key("lock")).try_acquire();
  ASSERT_TRUE(held);
  const auto replies = held.write_while_held({{"SET", key("s"), "1"},
                                              {"INCR", key("list")},
                                              {"NOSUCHCOMMAND", key("s")},
                                              {"SUBSCRIBE", key("channel")},
                                              {"INCR", key("s")}});
  ASSERT_EQ(replies.size(), 5u);
  EXPECT_EQ(text(replies[0]), "OK");
  ASSERT_TRUE(replies[1].is_error()) << replies[1].to_string();
  EXPECT_EQ(replies[1].str().rfind("WRONGTYPE", 0), 0u) << replies[1].str();
  EXPECT_TRUE(replies[2].is_error()) << replies[2].to_string();
  EXPECT_TRUE(replies[3].is_error()) << "scripts may not subscribe: " << replies[3].to_string();
  EXPECT_EQ(replies[4].integer(), 2) << "the writes after the refused ones ran";
  EXPECT_EQ(text(raw({"GET", key("s")})), "2");
  EXPECT_EQ(raw({"LLEN", key("list")}).integer(), 1) << "the list left as it was";
  EXPECT_TRUE(held.valid());
  EXPECT_TRUE(held.release());
}

TEST_F(WriteUnderLock, BadArgumentsAreRefusedBeforeAnythingIsSentAndKeepTheLease) {
  raw_redis raw(server().port());
  auto c = make_client();
  auto held = c.simple(key("lock")).try_acquire();
  ASSERT_TRUE(held);
  std::vector<std::string> huge = {"RPUSH", key("list")};
  huge.resize(4097, "x");
  const auto before = script_calls(raw);
  for (const writes_t& writes :
       {writes_t{{}}, writes_t{{""}}, writes_t{{"SET", key("data"), "v"}, {}}, writes_t{huge}}) {
    EXPECT_EQ(thrown_by([&] { held.write_while_held(writes); }), errc::invalid_argument);
    EXPECT_EQ(thrown_by([&] { held.write_and_release(writes); }), errc::invalid_argument);
    ASSERT_TRUE(held) << "a refused write_and_release keeps the lease";
  }
  EXPECT_EQ(script_calls(raw), before);
  EXPECT_EQ(raw({"EXISTS", key("data")}).integer(), 0);
  EXPECT_EQ(raw({"EXISTS", key("list")}).integer(), 0);
  EXPECT_TRUE(held.valid());

  // The most arguments allowed do fit.
  huge.pop_back();
  const auto pushed = held.write_and_release({huge});
  ASSERT_EQ(pushed.size(), 1u);
  EXPECT_EQ(pushed[0].integer(), 4094);
  EXPECT_FALSE(held);

  lease empty;
  EXPECT_EQ(thrown_by([&] {
              empty.write_while_held({{"SET", key("data"), "v"}});
            }),
            errc::lease_lost);
  EXPECT_EQ(thrown_by([&] {
              empty.write_and_release({{"SET", key("data"), "v"}});
            }),
            errc::lease_lost);
  EXPECT_EQ(raw({"EXISTS", key("data")}).integer(), 0);
}

TEST_F(WriteUnderLock, SemaphorePermitsHaveNoHolderToWriteUnder) {
  auto c = make_client();
  auto leased = c.leased_semaphore(key("leased"));
  ASSERT_TRUE(leased.try_set_permits(1));
  auto permit = leased.try_acquire();
  ASSERT_TRUE(permit);
  EXPECT_EQ(thrown_by([&] {
              permit.write_while_held({{"SET", key("data"), "v"}});
            }),
            errc::invalid_argument);
  EXPECT_EQ(thrown_by([&] {
              permit.write_and_release({{"SET", key("data"), "v"}});
            }),
            errc::invalid_argument);
  EXPECT_TRUE(permit) << "kept";
  EXPECT_EQ(leased.available(), 0);
  EXPECT_TRUE(permit.release());
  EXPECT_EQ(leased.available(), 1);
}

TEST_F(WriteUnderLock, ReentrantFairAndReadWriteHoldsWriteUnderTheirHashLayout) {
  raw_redis raw(server().port());
  auto c = make_client();
  {
    SCOPED_TRACE("reentrant: a re-entry writes and releases its own hold only");
    auto lock = c.reentrant(key("reentrant"));
    auto first = lock.try_acquire();
    auto again = lock.try_acquire();
    ASSERT_TRUE(first && again);
    EXPECT_EQ(again.write_and_release({{"INCR", key("n")}})[0].integer(), 1);
    wait_until([&] { return lock.hold_count() == 1; });
    EXPECT_EQ(raw({"EXISTS", key("reentrant")}).integer(), 1) << "the first hold remains";
    EXPECT_EQ(first.write_and_release({{"INCR", key("n")}})[0].integer(), 2);
    wait_until([&] { return raw({"EXISTS", key("reentrant")}).integer() == 0; });
  }
  {
    SCOPED_TRACE("fair");
    auto held = c.fair(key("fair")).try_acquire();
    ASSERT_TRUE(held);
    EXPECT_EQ(held.write_and_release({{"INCR", key("n")}})[0].integer(), 3);
    wait_until([&] { return raw({"EXISTS", key("fair")}).integer() == 0; });
  }
  {
    SCOPED_TRACE("read-write");
    auto rw = c.read_write(key("rw"));
    auto writing = rw.write().try_acquire();
    ASSERT_TRUE(writing);
    EXPECT_EQ(writing.write_while_held({{"INCR", key("n")}})[0].integer(), 4);
    EXPECT_TRUE(writing.release());
    auto reading = rw.read().try_acquire();
    ASSERT_TRUE(reading);
    EXPECT_EQ(reading.write_and_release({{"INCR", key("n")}})[0].integer(), 5);
    wait_until([&] { return raw({"EXISTS", key("rw")}).integer() == 0; });
  }
  EXPECT_EQ(text(raw({"GET", key("n")})), "5");
}

// An ACL that lets the user take locks but not run one of the writes, or not touch its key:
// that write gets the server's refusal in its place, and the others land.
TEST_F(WriteUnderLock, AWriteTheAclForbidsGetsTheServersRefusalInItsPlace) {
  raw_redis raw(server().port());
  raw({"SET", "secret", "s"});
  raw({"ACL", "SETUSER", "writer", "on", ">pw", "~" + key("") + "*", "~redisson*", "~dlock_holder*",
       "&*", "+@all", "-hset"});
  auto o = client_options::from_url(url());
  o.connection.user = "writer";
  o.connection.password = "pw";
  client c(o);
  auto held = c.simple(key("lock")).try_acquire();
  ASSERT_TRUE(held);
  const auto replies = held.write_and_release(
      {{"SET", key("data"), "v"}, {"HSET", key("hash"), "f", "v"}, {"SET", "secret", "mine"}});
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(text(replies[0]), "OK");
  for (const std::size_t i : {1u, 2u}) {
    ASSERT_TRUE(replies[i].is_error()) << replies[i].to_string();
    EXPECT_TRUE(is_acl_refusal(replies[i].str())) << replies[i].str();  // as ReadUnderLock's
  }
  EXPECT_EQ(text(raw({"GET", key("data")})), "v");
  EXPECT_EQ(raw({"EXISTS", key("hash")}).integer(), 0);
  EXPECT_EQ(text(raw({"GET", "secret"})), "s");
  wait_until([&] { return raw({"EXISTS", key("lock")}).integer() == 0; });
}

TEST_F(WriteUnderLock, BytesOfNamesAndValuesRoundTripExactly) {
  raw_redis raw(server().port());
  using namespace std::string_literals;
  const auto odd = "\xff\xfe\x00\n{-}\r\n\xc3\x28-"s;
  const auto data = key("data") + odd;
  const auto value = "v" + odd + "\x80";
  auto c = make_client();
  for (const bool reentrant : {false, true}) {
    SCOPED_TRACE(reentrant ? "reentrant" : "simple");
    const auto name = key(reentrant ? "r-lock\n{" : "s-lock\n{") + odd;
    auto held = reentrant ? c.reentrant(name).try_acquire() : c.simple(name).try_acquire();
    ASSERT_TRUE(held);
    const auto replies = held.write_and_release({{"SET", data, value}, {"GET", data}});
    ASSERT_EQ(replies.size(), 2u);
    EXPECT_EQ(text(replies[1]), value);
    EXPECT_EQ(text(raw({"GET", data})), value);
    wait_until([&] { return raw({"EXISTS", name}).integer() == 0; });
  }
}

// The release leaves with the writes: the server reads both in one read event.
TEST_F(WriteUnderLock, TheWritesAndTheReleaseLeaveInOneSend) {
  raw_redis raw(server().port());
  auto c = make_client();
  auto lock = c.simple(key("lock"));
  // Once, so that the scripts are loaded.
  auto first = lock.try_acquire({.lease_time = 60s});
  ASSERT_TRUE(first);
  (void)first.write_and_release({{"SET", key("data"), "0"}});
  wait_until([&] { return raw({"EXISTS", key("lock")}).integer() == 0; });
  auto held = lock.try_acquire({.lease_time = 60s});
  ASSERT_TRUE(held);
  const auto before = reads_processed(raw);
  (void)held.write_and_release({{"SET", key("data"), "1"}});
  const auto after = reads_processed(raw);
  // One read event for the writes and the release, and one for the INFO that counted them.
  EXPECT_EQ(after - before, 2);
  wait_until([&] { return raw({"EXISTS", key("lock")}).integer() == 0; });
  EXPECT_EQ(text(raw({"GET", key("data")})), "1");
}

// ---- the asynchronous forms ----

TEST_F(WriteUnderLock, TheCallbackFormsCompleteOnTheIoThread) {
  raw_redis raw(server().port());
  auto c = make_client();
  auto held = c.simple(key("lock")).try_acquire();
  ASSERT_TRUE(held);
  using called = called_back<call_result<std::vector<reply>>>;
  {
    std::promise<called> done;
    held.write_while_held_async({{"INCR", key("n")}}, into(done, c.simple(key("p"))));
    const auto got = settle(done.get_future());
    ASSERT_FALSE(got.result.error) << got.result.message;
    ASSERT_EQ(got.result.value.size(), 1u);
    EXPECT_EQ(got.result.value[0].integer(), 1);
    EXPECT_TRUE(got.on_io_thread);
    EXPECT_TRUE(held.valid());
  }
  {
    std::promise<called> done;
    held.write_while_held_async({{}}, into(done, c.simple(key("p"))));
    const auto got = settle(done.get_future());
    EXPECT_EQ(got.result.error, errc::invalid_argument) << got.result.message;
    EXPECT_TRUE(held.valid());
  }
  {
    std::promise<called> done;
    held.write_and_release_async({{"INCR", key("n")}}, into(done, c.simple(key("p"))));
    EXPECT_FALSE(held) << "emptied at once";
    const auto got = settle(done.get_future());
    ASSERT_FALSE(got.result.error) << got.result.message;
    EXPECT_EQ(got.result.value.at(0).integer(), 2);
    EXPECT_TRUE(got.on_io_thread);
    wait_until([&] { return raw({"EXISTS", key("lock")}).integer() == 0; });
  }
  {
    // An empty lease completes at once, on this thread.
    std::promise<called> done;
    held.write_and_release_async({{"INCR", key("n")}}, into(done, c.simple(key("p"))));
    const auto got = settle(done.get_future());
    EXPECT_EQ(got.result.error, errc::lease_lost);
    EXPECT_FALSE(got.on_io_thread);
  }
  EXPECT_EQ(text(raw({"GET", key("n")})), "2");
}

// Inside a completion, on the I/O thread: the blocking forms are refused (they would wait for
// the thread that delivers their reply) and leave the lease as it was; the callback form works.
TEST_F(WriteUnderLock, OnTheIoThreadTheBlockingFormsAreRefusedAndTheLeaseKept) {
  raw_redis raw(server().port());
  auto c = make_client();
  auto held = c.simple(key("lock")).try_acquire();
  ASSERT_TRUE(held);
  std::promise<std::pair<errc, errc>> refused;
  std::promise<call_result<std::vector<reply>>> written;
  held.extend_async(60s, [&](call_result<bool>) {
    const auto blocking_write = thrown_by([&] { held.write_while_held({{"INCR", key("n")}}); });
    const auto blocking_release = thrown_by([&] { held.write_and_release({{"INCR", key("n")}}); });
    refused.set_value({blocking_write, blocking_release});
    held.write_and_release_async({{"INCR", key("n")}}, [&](call_result<std::vector<reply>> r) {
      written.set_value(std::move(r));
    });
  });
  const auto [w, r] = settle(refused.get_future());
  EXPECT_EQ(w, errc::invalid_argument);
  EXPECT_EQ(r, errc::invalid_argument);
  const auto got = settle(written.get_future());
  ASSERT_FALSE(got.error) << got.message;
  EXPECT_EQ(got.value.at(0).integer(), 1) << "only the asynchronous write ran";
  EXPECT_FALSE(held);
  wait_until([&] { return raw({"EXISTS", key("lock")}).integer() == 0; });
}

spawned write_in_coroutine(lease& held, writes_t writes, std::promise<std::vector<reply>>& out) {
  try {
    out.set_value(co_await held.write_while_held_async(std::move(writes)));
  } catch (...) {
    out.set_exception(std::current_exception());
  }
}

TEST_F(WriteUnderLock, TheAwaitableWritesWhenAwaitedAndRefersToTheHold) {
  raw_redis raw(server().port());
  auto c = make_client();
  auto held = c.simple(key("lock")).try_acquire();
  ASSERT_TRUE(held);
  {
    std::promise<std::vector<reply>> out;
    write_in_coroutine(held, {{"INCR", key("n")}, {"INCR", key("n")}}, out);
    const auto replies = settle(out.get_future());
    ASSERT_EQ(replies.size(), 2u);
    EXPECT_EQ(replies[1].integer(), 2);
  }
  {
    // Nothing is sent until it is awaited.
    auto pending = held.write_while_held_async({{"INCR", key("n")}});
    EXPECT_EQ(text(raw({"GET", key("n")})), "2");
    // Released before the co_await: nothing to write under.
    EXPECT_TRUE(held.release());
    std::promise<std::vector<reply>> out;
    [](call_awaitable<std::vector<reply>> a, std::promise<std::vector<reply>>& o) -> spawned {
      try {
        o.set_value(co_await std::move(a));
      } catch (...) {
        o.set_exception(std::current_exception());
      }
    }(std::move(pending), out);
    EXPECT_EQ(thrown_by([&] { (void)settle(out.get_future()); }), errc::lease_lost);
  }
  EXPECT_EQ(text(raw({"GET", key("n")})), "2");
}

class WriteUnderLockRedLock : public redis_test {
 protected:
  std::size_t server_count() const override { return 3; }
};

TEST_F(WriteUnderLockRedLock, IsRefusedWithoutWritingAndKeepsTheLease) {
  client c(client_options::redlock_masters({url(0), url(1), url(2)}));
  auto held = c.simple(key("lock")).try_acquire();
  ASSERT_TRUE(held);
  EXPECT_EQ(thrown_by([&] {
              held.write_while_held({{"SET", key("d"), "v"}});
            }),
            errc::invalid_argument);
  EXPECT_EQ(thrown_by([&] {
              held.write_and_release({{"SET", key("d"), "v"}});
            }),
            errc::invalid_argument);
  EXPECT_TRUE(held.valid());
  for (std::size_t i = 0; i < 3; ++i) {
    raw_redis raw(server(i).port());
    EXPECT_EQ(raw({"EXISTS", key("d")}).integer(), 0);
  }
  EXPECT_TRUE(held.release());
}

}  // namespace
}  // namespace dlock::testing
