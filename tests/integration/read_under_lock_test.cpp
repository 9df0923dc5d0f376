// Acquiring a lock and reading under it (basic_lock::try_acquire_and_read): on a free lock the
// reads travel with the first attempt (one read script, never re-run), on a contended one they
// see what the previous holder wrote, writes among them are refused, errors take their read's
// place, and misuse (an empty command, a RedLock client) is refused before anything is sent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <future>
#include <thread>

#include "deployment_test.hpp"
#include "dlock/dlock.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using reads_t = std::vector<std::vector<std::string>>;

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

// ---- on every deployment ----

class ReadUnderLockTopology : public deployment_test {};

INSTANTIATE_TEST_SUITE_P(Deployments, ReadUnderLockTopology, ::testing::ValuesIn(all_deployments),
                         [](const auto& param_info) { return param_info.param; });

TEST_P(ReadUnderLockTopology, AFreeLocksReadsTravelWithTheFirstAttemptAndRunOnce) {
  const auto lock_name = tagged("k", "lock");
  const auto funds = tagged("k", "funds");
  const auto other = tagged("k", "other");
  auto raw = raw_for(lock_name);
  raw({"HSET", funds, "f", "100"});
  raw({"SET", other, "hello"});
  client c(d().options());
  auto lock = c.simple(lock_name);

  const auto before = script_calls(raw);
  auto got = lock.try_acquire_and_read(5s, {{"HGET", funds, "f"}, {"GET", other}});
  const auto calls = script_calls(raw) - before;

  ASSERT_TRUE(got.held);
  EXPECT_TRUE(got.held.valid());
  ASSERT_EQ(got.reads.size(), 2u);
  EXPECT_EQ(text(got.reads[0]), "100");
  EXPECT_EQ(text(got.reads[1]), "hello");
  EXPECT_EQ(calls, 2) << "the acquire script and one read script, nothing re-run";
  EXPECT_EQ(raw({"EXISTS", lock_name}).integer(), 1);
  // A key outside the lock's slot: the server's error in its place on a cluster (the script's
  // flags forbid reaching another slot), its value elsewhere.
  EXPECT_TRUE(got.held.release());
  const auto elsewhere = tagged("elsewhere", "data");
  raw_for(elsewhere)({"SET", elsewhere, "far"});
  auto far = lock.try_acquire_and_read(5s, {{"GET", other}, {"GET", elsewhere}});
  ASSERT_TRUE(far.held);
  ASSERT_EQ(far.reads.size(), 2u);
  EXPECT_EQ(text(far.reads[0]), "hello");
  if (GetParam() == "cluster") {
    // "...keys that do not hash to the same slot", or "...a non local key" on another node.
    EXPECT_TRUE(far.reads[1].is_error()) << far.reads[1].to_string();
  } else {
    EXPECT_EQ(text(far.reads[1]), "far");
  }
  EXPECT_TRUE(far.held.release());
  EXPECT_EQ(raw({"EXISTS", lock_name}).integer(), 0);
}

TEST_P(ReadUnderLockTopology, AWaitersReadsSeeWhatTheHolderWroteBeforeItReleased) {
  const auto lock_name = tagged("k", "lock");
  const auto data = tagged("k", "data");
  auto raw = raw_for(lock_name);
  raw({"SET", data, "1"});
  client holder_client(d().options());
  auto holder_lock = holder_client.reentrant(lock_name);
  auto held = holder_lock.try_acquire({.lease_time = 120s});  // fixed: no watchdog scripts
  ASSERT_TRUE(held);

  client c(d().options());
  const auto before = script_calls(raw);
  auto waiter = std::async(std::launch::async, [&] {
    return c.reentrant(lock_name).try_acquire_and_read(30s, {{"GET", data}});
  });
  // Waiting, and its first attempt and the read script behind it have run while held elsewhere.
  wait_until([&] { return holder_lock.waiting_clients() >= 1; });
  wait_until([&] { return script_calls(raw) >= before + 2; });
  ASSERT_EQ(waiter.wait_for(0s), std::future_status::timeout) << "granted while held";

  raw({"SET", data, "2"});
  EXPECT_TRUE(held.release());
  auto got = waiter.get();
  ASSERT_TRUE(got.held);
  EXPECT_TRUE(got.held.valid());
  ASSERT_EQ(got.reads.size(), 1u);
  EXPECT_EQ(text(got.reads[0]), "2") << "read under the lock, after the holder's write";
  EXPECT_TRUE(got.held.release());
}

// ---- standalone ----

class ReadUnderLock : public redis_test {
 protected:
  client make_client() { return client(client_options::from_url(url())); }
};

TEST_F(ReadUnderLock, ALockHeldElsewhereGivesNothingWhenTheWaitEnds) {
  raw_redis raw(server().port());
  raw({"SET", key("data"), "v"});
  auto holder_client = make_client();
  auto held = holder_client.simple(key("lock")).try_acquire({.lease_time = 120s});
  ASSERT_TRUE(held);
  auto c = make_client();
  for (const auto wait : {0ms, 20ms}) {
    SCOPED_TRACE(std::to_string(wait.count()) + " ms");
    auto got = c.simple(key("lock")).try_acquire_and_read(wait, {{"GET", key("data")}});
    EXPECT_FALSE(got.held);
    EXPECT_TRUE(got.reads.empty());
  }
  EXPECT_TRUE(held.valid());
}

// The first attempt is granted, and the reads behind it run under that grant, but its reply
// comes after the lease's validity (the server paused writes past it): the grant is undone and
// made again with a new fencing token. The reads that ran under the dead grant must not be
// returned; reading the counter itself shows which grant they ran under.
TEST_F(ReadUnderLock, ReadsUnderAGrantThatWasDeadOnArrivalAreReadAgain) {
  raw_redis raw(server().port());
  const auto name = key("lock");
  const auto counter = keys_of_lock(name).fence_counter;
  auto c = make_client();
  // Returns at once; the server then holds every write (the acquire script) for 1 s, longer
  // than the 300 ms lease asked for. The read script queues behind it on the same connection.
  raw({"CLIENT", "PAUSE", "1000", "WRITE"});
  auto got = c.simple(name).try_acquire_and_read(20s, {{"GET", counter}}, {.lease_time = 300ms});
  ASSERT_TRUE(got.held);
  EXPECT_GE(c.stats().grants_born_dead, 1u);
  ASSERT_EQ(got.reads.size(), 1u);
  EXPECT_EQ(text(got.reads[0]), std::to_string(got.held.fence()))
      << "the reads ran under an earlier grant than the one returned";
}

// On a free lock the attempt and the reads leave in one send (net::write_batch): the server
// reads them in one read event. Sent apart, the second would wait for the I/O thread to wake.
TEST_F(ReadUnderLock, AFreeLocksAttemptAndReadsLeaveInOneSend) {
  raw_redis raw(server().port());
  raw({"SET", key("data"), "v"});
  auto c = make_client();
  auto lock = c.simple(key("lock"));
  // Once, so that the scripts are loaded (a first EVAL is larger, but still one send).
  ASSERT_TRUE(lock.try_acquire_and_read(5s, {{"GET", key("data")}}, {.lease_time = 60s}).held);
  wait_until([&] { return raw({"EXISTS", key("lock")}).integer() == 0; });
  const auto before = reads_processed(raw);
  auto got = lock.try_acquire_and_read(5s, {{"GET", key("data")}}, {.lease_time = 60s});
  const auto after = reads_processed(raw);
  ASSERT_TRUE(got.held);
  ASSERT_EQ(got.reads.size(), 1u);
  EXPECT_EQ(text(got.reads[0]), "v");
  // One read event for the lock's client, and one for the INFO that counted them.
  EXPECT_EQ(after - before, 2);
}

TEST_F(ReadUnderLock, AWriteAmongTheReadsIsRefusedInItsPlaceHeldOrNot) {
  raw_redis raw(server().port());
  const auto data = key("data");
  const auto other = key("other");
  raw({"SET", data, "orig"});
  const reads_t reads = {
      {"GET", data}, {"SET", data, "x"}, {"DEL", data}, {"SET", other, "x"}, {"GET", data}};
  auto c = make_client();
  auto lock = c.simple(key("lock"));
  [&] {
    SCOPED_TRACE("free: granted");
    auto got = lock.try_acquire_and_read(5s, reads);
    ASSERT_TRUE(got.held);
    ASSERT_EQ(got.reads.size(), 5u);
    EXPECT_EQ(text(got.reads[0]), "orig");
    for (std::size_t i = 1; i <= 3; ++i) {
      const auto& r = got.reads[i];
      EXPECT_TRUE(r.is_error() && (lowercase(r.str()).find("write") != std::string::npos ||
                                   lowercase(r.str()).find("read-only") != std::string::npos))
          << i << ": " << r.to_string();
    }
    EXPECT_EQ(text(got.reads[4]), "orig");
    EXPECT_EQ(text(raw({"GET", data})), "orig");
    EXPECT_EQ(raw({"EXISTS", other}).integer(), 0);
    EXPECT_TRUE(got.held.release());
  }();
  raw({"SET", data, "orig"});  // the next case starts from the same data even if this one failed
  raw({"DEL", other});
  {
    SCOPED_TRACE("held elsewhere: not granted");
    auto holder_client = make_client();
    auto held = holder_client.simple(key("lock")).try_acquire({.lease_time = 120s});
    ASSERT_TRUE(held);
    const auto before = script_calls(raw);
    auto got = lock.try_acquire_and_read(0ms, reads);
    EXPECT_FALSE(got.held);
    EXPECT_TRUE(got.reads.empty());
    // The read script travels behind the attempt whatever it finds; wait until it has run.
    wait_until([&] { return script_calls(raw) >= before + 2; });
    EXPECT_EQ(text(raw({"GET", data})), "orig");
    EXPECT_EQ(raw({"EXISTS", other}).integer(), 0);
  }
}

TEST_F(ReadUnderLock, AReadOfTheWrongTypeGivesItsErrorAndTheOthersTheirValues) {
  raw_redis raw(server().port());
  raw({"SET", key("string"), "s"});
  raw({"RPUSH", key("list"), "a", "b"});
  raw({"HSET", key("hash"), "f", "h"});
  auto c = make_client();
  auto got = c.simple(key("lock"))
                 .try_acquire_and_read(5s, {{"GET", key("string")},
                                            {"GET", key("list")},
                                            {"HGET", key("hash"), "f"},
                                            {"GET", key("missing")},
                                            {"LRANGE", key("list"), "0", "-1"},
                                            {"NOSUCHCOMMAND", key("string")}});
  ASSERT_TRUE(got.held);
  EXPECT_TRUE(got.held.valid());
  ASSERT_EQ(got.reads.size(), 6u);
  EXPECT_EQ(text(got.reads[0]), "s");
  ASSERT_TRUE(got.reads[1].is_error()) << got.reads[1].to_string();
  EXPECT_EQ(got.reads[1].str().rfind("WRONGTYPE", 0), 0u) << got.reads[1].str();
  EXPECT_EQ(text(got.reads[2]), "h");
  EXPECT_TRUE(got.reads[3].is_nil()) << got.reads[3].to_string();
  ASSERT_EQ(got.reads[4].elements().size(), 2u);
  EXPECT_EQ(text(got.reads[4].at(0)), "a");
  EXPECT_EQ(text(got.reads[4].at(1)), "b");
  EXPECT_TRUE(got.reads[5].is_error()) << got.reads[5].to_string();
  EXPECT_EQ(raw({"EXISTS", key("lock")}).integer(), 1);
  EXPECT_TRUE(got.held.release());
}

TEST_F(ReadUnderLock, AnEmptyOrOversizedCommandIsRefusedBeforeAnythingIsSent) {
  raw_redis raw(server().port());
  auto c = make_client();
  auto lock = c.simple(key("lock"));
  const auto before = script_calls(raw);
  std::vector<std::string> huge = {"MGET"};
  huge.resize(4097, key("data"));  // more than the script can hand to one call
  for (const reads_t& reads : {reads_t{{}}, reads_t{{""}}, reads_t{{"GET", key("data")}, {}},
                               reads_t{{"", "x"}}, reads_t{huge}}) {
    try {
      (void)lock.try_acquire_and_read(5s, reads);
      ADD_FAILURE() << "an empty command was accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
    }
  }
  EXPECT_EQ(raw({"EXISTS", key("lock")}).integer(), 0);
  EXPECT_EQ(script_calls(raw), before);
  EXPECT_TRUE(lock.try_acquire()) << "nothing left held";
}

TEST_F(ReadUnderLock, ReentrantAndFairLocksReadUnderTheirHashLayout) {
  raw_redis raw(server().port());
  raw({"SET", key("data"), "v"});
  auto c = make_client();
  // Acquires `lock` reading the data; the lease, its one read checked.
  const auto acquire_reading_data = [&](auto lock) {
    auto got = lock.try_acquire_and_read(5s, {{"GET", key("data")}});
    EXPECT_TRUE(got.held.valid());
    EXPECT_EQ(got.reads.size() == 1 ? text(got.reads[0]) : "<not one read>", "v");
    return std::move(got.held);
  };
  {
    SCOPED_TRACE("reentrant");
    auto lock = c.reentrant(key("reentrant"));
    auto first = acquire_reading_data(lock);
    ASSERT_TRUE(first);
    // Re-entry by the same thread: held already, the reads run under the same hold.
    auto again = lock.try_acquire_and_read(0ms, {{"GET", key("data")}, {"HLEN", key("reentrant")}});
    ASSERT_TRUE(again.held);
    ASSERT_EQ(again.reads.size(), 2u);
    EXPECT_EQ(text(again.reads[0]), "v");
    EXPECT_EQ(again.reads[1].integer(), 1) << "one owner";
    EXPECT_EQ(lock.hold_count(), 2);
    EXPECT_TRUE(again.held.release());
    EXPECT_TRUE(first.release());
    EXPECT_EQ(raw({"EXISTS", key("reentrant")}).integer(), 0);
  }
  {
    SCOPED_TRACE("fair");
    auto got = acquire_reading_data(c.fair(key("fair")));
    ASSERT_TRUE(got);
    EXPECT_EQ(text(raw({"TYPE", key("fair")})), "hash");
    EXPECT_TRUE(got.release());
    EXPECT_EQ(raw({"EXISTS", key("fair")}).integer(), 0);
  }
}

// Readers share the lock, and each reads under its own hold (the hash field of its owner); a
// writer waiting behind them reads what the last reader left, after both have gone.
TEST_F(ReadUnderLock, ReadersAndWritersOfAReadWriteLockReadUnderTheirHolds) {
  raw_redis raw(server().port());
  raw({"SET", key("data"), "1"});
  auto c = make_client();
  auto other = make_client();
  auto rw = c.read_write(key("rw"));
  auto first = rw.read().try_acquire_and_read(5s, {{"GET", key("data")}});
  ASSERT_TRUE(first.held);
  auto second = other.read_write(key("rw")).read().try_acquire_and_read(5s, {{"GET", key("data")}});
  ASSERT_TRUE(second.held) << "read holds are shared";
  ASSERT_EQ(first.reads.size(), 1u);
  ASSERT_EQ(second.reads.size(), 1u);
  EXPECT_EQ(text(first.reads[0]), "1");
  EXPECT_EQ(text(second.reads[0]), "1");
  auto writing = std::async(std::launch::async, [&] {
    return other.read_write(key("rw")).write().try_acquire_and_read(30s, {{"GET", key("data")}});
  });
  wait_until([&] { return rw.read().waiting_clients() >= 1; });
  raw({"SET", key("data"), "2"});  // what the readers' work would have left
  EXPECT_TRUE(first.held.release());
  EXPECT_TRUE(second.held.release());
  auto written = writing.get();
  ASSERT_TRUE(written.held);
  ASSERT_EQ(written.reads.size(), 1u);
  EXPECT_EQ(text(written.reads[0]), "2");
}

// An ACL that lets the user take locks but not run a read, or not touch its key: that read
// gets the server's refusal in its place, the others their values, and the lease is held.
TEST_F(ReadUnderLock, AReadTheAclForbidsGetsTheServersRefusalInItsPlace) {
  raw_redis raw(server().port());
  raw({"SET", key("data"), "v"});
  raw({"HSET", key("hash"), "f", "h"});
  raw({"SET", "secret", "s"});
  // Every key of this test (they start with its name) and the lock's derived keys; no HGET.
  raw({"ACL", "SETUSER", "reader", "on", ">pw", "~" + key("") + "*", "~redisson*", "~dlock_holder*",
       "&*", "+@all", "-hget"});
  auto o = client_options::from_url(url());
  o.connection.user = "reader";
  o.connection.password = "pw";
  client c(o);
  auto got = c.simple(key("lock"))
                 .try_acquire_and_read(
                     5s, {{"GET", key("data")}, {"HGET", key("hash"), "f"}, {"GET", "secret"}});
  ASSERT_TRUE(got.held);
  EXPECT_TRUE(got.held.valid());
  ASSERT_EQ(got.reads.size(), 3u);
  EXPECT_EQ(text(got.reads[0]), "v");
  for (const std::size_t i : {1u, 2u}) {
    ASSERT_TRUE(got.reads[i].is_error()) << got.reads[i].to_string();
    // The server's own words, inside a script: "ERR The user executing the script can't run
    // this command..." and "... can't access at least one of the keys ..." (Redis 7.0); "ERR ACL
    // failure in script: User reader has no permissions to run the 'hget' command" and "... No
    // permissions to access a key" (Valkey 8).
    EXPECT_TRUE(is_acl_refusal(got.reads[i].str())) << got.reads[i].str();
  }
  EXPECT_TRUE(got.held.release());
}

TEST_F(ReadUnderLock, SemaphoresAreRefusedWithoutTakingAPermit) {
  auto c = make_client();
  auto plain = c.semaphore(key("sem"));
  auto leased = c.leased_semaphore(key("leased"));
  ASSERT_TRUE(plain.try_set_permits(1));
  ASSERT_TRUE(leased.try_set_permits(1));
  for (basic_lock* s : std::initializer_list<basic_lock*>{&plain, &leased}) {
    SCOPED_TRACE(s->name());
    try {
      s->try_acquire_and_read(5s, {{"GET", key("data")}});
      ADD_FAILURE() << "a semaphore took reads";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
    }
  }
  EXPECT_EQ(plain.available(), 1);
  EXPECT_EQ(leased.available(), 1);
}

TEST_F(ReadUnderLock, BytesOfNamesAndValuesRoundTripExactly) {
  raw_redis raw(server().port());
  using namespace std::string_literals;
  const auto odd = "\xff\xfe\x00\n{-}\r\n\xc3\x28-"s;
  const auto data = key("data") + odd;
  const auto hash = key("hash{") + odd;
  const auto field = "f" + odd;
  const auto value = "v" + odd + "\x80";
  raw({"SET", data, value});
  raw({"HSET", hash, field, value + "h"});
  auto c = make_client();
  for (const bool reentrant : {false, true}) {
    SCOPED_TRACE(reentrant ? "reentrant" : "simple");
    const auto name = key(reentrant ? "r-lock\n{" : "s-lock\n{") + odd;
    auto got =
        reentrant
            ? c.reentrant(name).try_acquire_and_read(5s, {{"GET", data}, {"HGET", hash, field}})
            : c.simple(name).try_acquire_and_read(5s, {{"GET", data}, {"HGET", hash, field}});
    ASSERT_TRUE(got.held);
    ASSERT_EQ(got.reads.size(), 2u);
    EXPECT_EQ(text(got.reads[0]), value);
    EXPECT_EQ(text(got.reads[1]), value + "h");
    EXPECT_EQ(raw({"EXISTS", name}).integer(), 1);
    EXPECT_TRUE(got.held.release());
    EXPECT_EQ(raw({"EXISTS", name}).integer(), 0);
  }
}

TEST_F(ReadUnderLock, NoReadsActsAsTryAcquireFor) {
  raw_redis raw(server().port());
  auto c = make_client();
  auto lock = c.simple(key("lock"));
  auto got = lock.try_acquire_and_read(5s, {});
  ASSERT_TRUE(got.held);
  EXPECT_TRUE(got.held.valid());
  EXPECT_TRUE(got.reads.empty());
  EXPECT_EQ(text(raw({"GET", key("lock")})).size(), 32u) << "the simple layout's token";
  EXPECT_FALSE(lock.try_acquire_and_read(0ms, {}).held) << "not reentrant";
  EXPECT_TRUE(got.held.release());
  EXPECT_EQ(raw({"EXISTS", key("lock")}).integer(), 0);
}

class ReadUnderLockRedLock : public redis_test {
 protected:
  std::size_t server_count() const override { return 3; }
};

TEST_F(ReadUnderLockRedLock, IsRefusedWithoutSendingAnAcquisition) {
  client c(client_options::redlock_masters({url(0), url(1), url(2)}));
  std::vector<std::int64_t> before;
  for (std::size_t i = 0; i < 3; ++i) {
    raw_redis raw(server(i).port());
    before.push_back(script_calls(raw));
  }
  for (const bool reentrant : {false, true}) {
    SCOPED_TRACE(reentrant ? "reentrant" : "simple");
    try {
      (void)(reentrant ? c.reentrant(key("lock")).try_acquire_and_read(5s, {{"GET", key("d")}})
                       : c.simple(key("lock")).try_acquire_and_read(5s, {{"GET", key("d")}}));
      ADD_FAILURE() << "a RedLock client read under a lock";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
    }
  }
  for (std::size_t i = 0; i < 3; ++i) {
    raw_redis raw(server(i).port());
    EXPECT_EQ(script_calls(raw), before[i]) << "master " << i;
    EXPECT_EQ(raw({"EXISTS", key("lock")}).integer(), 0) << "master " << i;
  }
  auto l = c.simple(key("lock")).try_acquire_for(5s);
  EXPECT_TRUE(l) << "nothing left held";
}

}  // namespace
}  // namespace dlock::testing
