// The library's safety promises under the conditions that broke them: fencing tokens across a
// flush and a restart without persistence, grants whose reply comes back after their validity,
// servers that are busy or loading, errors that waiting cannot fix, names that hold other data,
// names with braces, and releases that must say whether the lock was still held.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "dlock_lua_scripts.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

class Safety : public redis_test {
 protected:
  embedded::server_options options_for(std::size_t) const override {
    embedded::server_options o;
    // DEBUG SLEEP and a short BUSY threshold (a script running 100 ms makes others wait).
    o.extra_args = {"--enable-debug-command", "yes", "--busy-reply-threshold", "100"};
    return o;
  }

  client_options options(std::chrono::milliseconds command_timeout = 5s) {
    auto o = client_options::from_url(url());
    o.connection.command_timeout = command_timeout;
    return o;
  }

  /// Until `done` holds, asking the server through a fresh connection each time; a restarted
  /// server refuses connections for a moment.
  template <class Check>
  void wait_until(Check done, std::chrono::milliseconds limit = 30s) {
    const auto deadline = steady::now() + limit;
    while (!done()) {
      ASSERT_LT(steady::now(), deadline) << "the condition never came true";
      std::this_thread::sleep_for(2ms);
    }
  }

  /// True if a data command (not PING, which a loading server answers) gets this error.
  bool server_answers_with(std::string_view error_code) {
    try {
      raw_redis raw(server().port());
      const auto r = raw({"EXISTS", "probe"});
      return r.is_error() && r.str().starts_with(error_code);
    } catch (const std::exception&) {
      return false;  // not listening (yet)
    }
  }

  static lease acquire(const client& c, const std::string& kind, const std::string& name,
                       std::chrono::milliseconds wait, const lease_options& o = {}) {
    if (kind == "simple") return c.simple(name).try_acquire_for(wait, o);
    return c.reentrant(name).try_acquire_for(wait, o);
  }
};

TEST_F(Safety, FencingTokensNeverGoBackwardsAfterAFlushOrARestartWithoutPersistence) {
  for (const std::string kind : {"reentrant", "simple"}) {
    SCOPED_TRACE(kind);
    client c(url());
    const auto name = key(kind);
    const auto counter = keys_of_lock(name).fence_counter;
    auto take = [&] {
      auto l = acquire(c, kind, name, 20s);
      EXPECT_TRUE(l);
      EXPECT_TRUE(l.valid());
      const auto fence = l.fence();
      EXPECT_TRUE(l.release());
      return fence;
    };
    const auto before_flush = take();
    raw_redis(server().port())({"FLUSHALL"});
    const auto after_flush = take();
    EXPECT_GT(after_flush, before_flush) << "a flushed counter must not restart at 1";
    server().kill();  // no persistence: everything is gone
    server().start();
    const auto after_restart = take();
    EXPECT_GT(after_restart, after_flush) << "a counter lost to a restart must not restart at 1";
    // Redisson's fenced lock INCRs the same counter: it keeps working, and so do we after it.
    const auto redisson = raw_redis(server().port())({"INCR", counter}).integer();
    EXPECT_EQ(static_cast<std::uint64_t>(redisson), after_restart + 1);
    EXPECT_GT(take(), static_cast<std::uint64_t>(redisson));
  }
}

TEST_F(Safety, ASharedFenceCounterAlsoSurvivesAFlush) {
  auto o = options();
  o.fence_counter = key("fences");
  client c(o);
  auto first = c.simple(key("a")).try_acquire();
  ASSERT_TRUE(first);
  const auto before = first.fence();
  first.release();
  raw_redis(server().port())({"FLUSHALL"});
  auto second = c.reentrant(key("b")).try_acquire();
  ASSERT_TRUE(second);
  EXPECT_GT(second.fence(), before);
}

TEST_F(Safety, ACounterThatNeverStartedFromTheClockIsRaisedToItNeverLowered) {
  // A counter Redisson's fenced lock started at 1, and one a script left at 1 when the ACL let it
  // INCR but not read the clock: the next grant's token comes from the clock, above both.
  raw_redis raw(server().port());
  raw({"ACL", "SETUSER", "notime", "on", ">pw", "~*", "&*", "+@all", "-time"});
  auto o = options();
  o.connection.user = "notime";
  o.connection.password = "pw";
  client denied(o);
  client c(url());
  const auto clock_era = std::uint64_t{1'000'000'000'000'000};
  for (const std::string kind : {"reentrant", "simple"}) {
    SCOPED_TRACE(kind);
    const auto name = key("small-" + kind);
    const auto counter = keys_of_lock(name).fence_counter;
    raw({"SET", counter, "5"});
    auto l = acquire(c, kind, name, 5s);
    ASSERT_TRUE(l);
    EXPECT_GT(l.fence(), clock_era);
    EXPECT_EQ(raw({"GET", counter}).str(), std::to_string(l.fence()));
    l.release();

    raw({"DEL", counter});
    for (int attempt = 0; attempt < 2; ++attempt) {
      EXPECT_THROW(acquire(denied, kind, name, 5s), error);
    }
    EXPECT_EQ(raw({"EXISTS", name}).integer(), 0) << "no lock written without its token";
    EXPECT_EQ(raw({"GET", counter}).str(), "2") << "each failed attempt left its INCR";
    auto after = acquire(c, kind, name, 5s);
    ASSERT_TRUE(after);
    EXPECT_GT(after.fence(), l.fence());
  }
}

// A fencing counter holds digits, which a lock's token may be too; without an expiry it is
// told apart by that (a lock always has one), but an operator or a tool may give it one. Its
// name tells it apart then: neither an acquisition nor a forced unlock takes it for a lock.
TEST_F(Safety, AFencingCounterIsNeverTakenForALock) {
  client c(url());
  raw_redis raw(server().port());
  const auto counter = keys_of_lock(key("counted")).fence_counter;
  c.simple(key("counted")).try_acquire().release();
  const auto value = raw({"GET", counter}).str();
  raw({"PEXPIRE", counter, "600000"});
  for (const std::string kind : {"reentrant", "simple"}) {
    SCOPED_TRACE(kind);
    try {
      acquire(c, kind, counter, 10s);
      ADD_FAILURE() << "a counter taken for a lock";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::wrong_type);
      EXPECT_NE(std::string(e.what()).find("holds a counter, not a lock"), std::string::npos)
          << e.what();
    }
  }
  for (const auto check :
       {force_unlock_check::layout_and_expiry, force_unlock_check::confirmed_kind}) {
    EXPECT_THROW(c.simple(counter).force_unlock(check), error);
  }
  EXPECT_EQ(raw({"GET", counter}).str(), value) << "the counter must be left as it was";
}

// A failover to a replica that missed the last grants: the promoted server's counter is behind
// them, and used to hand out their tokens again. Every token is at least the server's clock at
// its grant, so the promoted server's next token is above every lost one (the clocks here are
// one). Simulated: a replica synced, then promoted (REPLICAOF NO ONE) while the old master
// grants once more.
TEST_F(Safety, FencingTokensKeepRisingAcrossAFailoverThatLostGrants) {
  for (const std::string kind : {"reentrant", "simple"}) {
    SCOPED_TRACE(kind);
    const auto name = key(kind);
    client old_master(url());
    acquire(old_master, kind, name, 5s).release();
    embedded::server_options replica_options;
    replica_options.extra_args = {"--replicaof", "127.0.0.1", std::to_string(server().port())};
    embedded::redis_server replica(replica_options);
    const auto counter = keys_of_lock(name).fence_counter;
    raw_redis master_raw(server().port());
    raw_redis replica_raw(replica.port());
    wait_until([&] {
      return replica_raw({"GET", counter}).to_string() == master_raw({"GET", counter}).to_string();
    });
    replica_raw({"REPLICAOF", "NO", "ONE"});
    std::uint64_t lost = 0;
    for (int i = 0; i < 3; ++i) {
      auto l = acquire(old_master, kind, name, 5s);
      ASSERT_TRUE(l);
      lost = l.fence();
    }
    client promoted(replica.url());
    auto after = acquire(promoted, kind, name, 5s);
    ASSERT_TRUE(after);
    EXPECT_GT(after.fence(), lost) << "a token handed out again after the failover";
  }
}

TEST_F(Safety, AReEntryAfterItsCounterWasLostReportsANewerTokenNeverALowerOne) {
  // A counter deleted (or evicted under an allkeys-* maxmemory policy) while its lock is held:
  // a re-entry, or a retried simple grant finding its own token, used to report the counter as
  // it then stood, 0, below the hold's own token. Each acquire script is sent by hand twice with
  // the same owner, the counter deleted between the two; then once more with a counter of
  // another type, which must fail before the script writes anything.
  client c(url());
  raw_redis raw(server().port());
  const script reentrant{std::string(lua::reentrant_acquire)};
  const script simple{std::string(lua::simple_acquire)};
  const script fair{std::string(lua::fair_acquire)};
  const script read{std::string(lua::read_acquire)};
  const script write{std::string(lua::write_acquire)};
  const script multi{std::string(lua::multi_acquire)};
  struct attempt_by_hand {
    std::string kind;
    const script& s;
    std::vector<std::string> args;
    std::int64_t again_status;  // what the second attempt answers: re-entered, or granted again
    std::string field;          // the hash field holding the hold count (empty: a token)
  };
  const std::string owner = c.id() + ":1";
  const std::vector<attempt_by_hand> cases = {
      {"reentrant", reentrant, {"30000", owner}, 2, owner},
      {"simple", simple, {"a1b2c3d4", "30000"}, 1, ""},
      {"fair", fair, {"30000", owner, "30000", "1"}, 2, owner},
      {"read", read, {"30000", owner}, 2, owner},
      {"write", write, {"30000", owner + ":write", "30000", "1", "0"}, 2, owner + ":write"},
      {"multi", multi, {"30000", owner}, 2, owner},
  };
  auto keys_for = [](const std::string& kind, const std::string& name,
                     const std::string& counter) -> std::vector<std::string> {
    if (kind == "fair") {
      return {name, "redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}",
              counter};
    }
    if (kind == "read" || kind == "write") return {name, counter, "{" + name + "}:write_intent"};
    return {name, counter};
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.kind);
    const auto name = key("lost-counter-" + k.kind);
    const auto counter = keys_of_lock(name).fence_counter;
    const auto keys = keys_for(k.kind, name, counter);
    const std::vector<std::string_view> key_views(keys.begin(), keys.end());
    const std::vector<std::string_view> arg_views(k.args.begin(), k.args.end());
    // The multi-lock's reply leads with 1 for "all granted", then a status and token per name.
    const std::size_t at = k.kind == "multi" ? 1 : 0;
    auto attempt = [&] { return c.redis().eval(k.s, key_views, arg_views); };
    auto holds = [&] {
      return k.field.empty() ? raw({"GET", name}).str() : raw({"HGET", name, k.field}).str();
    };

    const auto first = attempt();
    ASSERT_TRUE(first.is_array()) << first.to_string();
    ASSERT_EQ(first.at(at).integer(), 1) << first.to_string();
    const auto first_fence = first.at(at + 1).integer();

    raw({"DEL", counter});
    const auto again = attempt();
    ASSERT_TRUE(again.is_array()) << again.to_string();
    ASSERT_EQ(again.at(at).integer(), k.again_status) << again.to_string();
    EXPECT_GT(again.at(at + 1).integer(), first_fence) << "a lost counter must not report 0";
    EXPECT_EQ(raw({"GET", counter}).str(), std::to_string(again.at(at + 1).integer()));

    const auto held_before = holds();
    raw({"DEL", counter});
    raw({"RPUSH", counter, "not a counter"});
    EXPECT_THROW(attempt(), error);
    EXPECT_EQ(holds(), held_before) << "nothing written when the token cannot be drawn";
    raw({"DEL", counter, name, "{" + name + "}:write_intent"});
  }
}

TEST_F(Safety, AReleaseTheServerRefusesIsUnconfirmedNotALostLease) {
  // An ACL that lets the acquire scripts run but not the release's read: the release fails on
  // the server, the lock stays until its lease ends, and the caller hears neither "released" nor
  // "not held" (which would tell it the lease had been lost).
  raw_redis raw(server().port());
  raw({"ACL", "SETUSER", "noread", "on", ">pw", "~*", "&*", "+@all", "-get", "-hget"});
  auto o = options();
  o.connection.user = "noread";
  o.connection.password = "pw";
  client c(o);
  for (const std::string kind : {"reentrant", "simple"}) {
    SCOPED_TRACE(kind);
    const auto name = key("refused-" + kind);
    lease_options fixed;
    fixed.lease_time = 10s;
    auto l = acquire(c, kind, name, 5s, fixed);
    ASSERT_TRUE(l);
    EXPECT_EQ(l.release_checked(), release_outcome::unconfirmed);
    EXPECT_EQ(raw({"EXISTS", name}).integer(), 1) << "the lock stays until its lease ends";
    raw({"DEL", name});
  }
  // Without the ACL, a lock whose key now holds data of another type was lost, and the release
  // leaves that data alone.
  client allowed(url());
  for (const std::string kind : {"reentrant", "simple"}) {
    SCOPED_TRACE(kind);
    const auto name = key("replaced-" + kind);
    auto l = acquire(allowed, kind, name, 5s);
    ASSERT_TRUE(l);
    raw({"DEL", name});
    raw({"RPUSH", name, "job"});
    EXPECT_EQ(l.release_checked(), release_outcome::not_held);
    EXPECT_EQ(raw({"LRANGE", name, "0", "-1"}).at(0).str(), "job");
  }
}

TEST_F(Safety, AGrantWhoseReplyComesAfterItsValidityIsUndoneAndTheWaitGoesOn) {
  // The holder's fixed lease runs out while the server sleeps; the waiter's re-check attempt,
  // sent during the sleep, is granted when the server wakes, 2.5 s after it was sent: longer than
  // the 1 s lease it asked for. That grant must not be handed out.
  client holder(url());
  auto held = holder.simple(key("job")).try_acquire({.lease_time = 1000ms});
  ASSERT_TRUE(held);
  auto o = options(10s);  // the attempt in flight during the sleep must not time out
  o.max_recheck = 100ms;
  // A watchdog lease as short as the holder's: born dead just the same, but once handed out it
  // is renewed, so the release below holds however loaded the machine is.
  o.watchdog_lease = 1000ms;
  client waiter(o);
  auto got = std::async(std::launch::async, [&] {
    auto l = waiter.simple(key("job")).try_acquire_for(20s);
    return std::make_pair(l.valid(), std::move(l));
  });
  wait_until([&] { return holder.simple(key("job")).waiting_clients() == 1; });
  raw_redis(server().port())({"DEBUG", "SLEEP", "2.5"});
  auto [valid_when_returned, l] = got.get();
  ASSERT_TRUE(l) << "the lock was free and the wait had time left";
  EXPECT_TRUE(valid_when_returned) << "a grant that was dead on arrival was handed out";
  EXPECT_GE(waiter.stats().grants_born_dead, 1u);
  // The undo of the dead grant and the next grant carry the same token: the undo must run
  // first (calls on a connection stay in order, even a script's first call on it).
  EXPECT_EQ(l.release_checked(), release_outcome::released);
}

TEST_F(Safety, AWaiterRidesOutABusyServer) {
  client c(url());
  // Another client's script keeps the server busy for 1.5 s.
  auto busy = std::async(std::launch::async, [&] {
    raw_redis raw(server().port());
    return raw({"EVAL",
                "local t = redis.call('time'); local stop = t[1] * 1000000 + t[2] + 1500000 "
                "repeat t = redis.call('time') until t[1] * 1000000 + t[2] >= stop return 1",
                "0"});
  });
  wait_until([&] { return server_answers_with("BUSY"); });
  try {
    c.simple(key("job")).try_acquire();
    ADD_FAILURE() << "a single attempt during BUSY must report it";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::server_busy);
    EXPECT_NE(std::string(e.what()).find("BUSY"), std::string::npos) << e.what();
  }
  auto l = c.simple(key("job")).try_acquire_for(20s);
  EXPECT_TRUE(l) << "BUSY is temporary: the wait must ride it out";
  EXPECT_EQ(busy.get().integer(), 1);
}

TEST_F(Safety, LocalHandOffsRideOutStallsAndARestartWithoutAStaleWrite) {
  // Threads of one client hand locks around (each next attempt sent right behind the release)
  // while the server stalls and then restarts empty. Under each grant the holder writes its
  // fence to a resource on another server through fenced_set. Through the stalls no two hold
  // at once; every thread keeps getting the lock after each fault; the resource ends with the
  // largest fence it took.
  embedded::redis_server resource_server;
  redis_client resource(resource_server.url());
  client c(options(2s));
  std::atomic<int> inside{0};
  std::atomic<bool> exclusive{true};  // false once the lock's data may be gone (restart)
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> grants{0};
  std::mutex accepted_mutex;
  std::vector<std::uint64_t> accepted;  // fences the resource took
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      // Two threads of each kind on one name: the kinds exclude each other too.
      basic_lock lock = t % 2 ? basic_lock(c.simple(key("stalled"))) : c.reentrant(key("stalled"));
      while (!stop) {
        lease l;
        try {
          l = lock.try_acquire_for(20s);
        } catch (const error&) {
          continue;  // a restart's refusals while no time was left for retries
        }
        if (!l) continue;
        if (inside.fetch_add(1) != 0 && exclusive) ADD_FAILURE() << "two holders at once";
        const auto w = fenced_set(resource, key("resource"), std::to_string(l.fence()), l.fence());
        if (w.written) {
          std::lock_guard g(accepted_mutex);
          accepted.push_back(l.fence());
        }
        inside.fetch_sub(1);
        l.release();
        ++grants;
      }
    });
  }
  raw_redis raw(server().port());
  auto keeps_going = [&] {
    const auto before = grants.load();
    wait_until([&] { return grants >= before + 50; });
  };
  keeps_going();
  raw({"DEBUG", "SLEEP", "0.3"});
  keeps_going();
  raw({"CLIENT", "PAUSE", "300", "ALL"});
  keeps_going();
  exclusive = false;
  server().kill();  // no persistence: the lock and its fence counter are gone
  server().start();
  keeps_going();
  stop = true;
  for (auto& w : workers)
    w.join();
  // The resource holds the largest fence it ever took: no write with an older one came after.
  ASSERT_FALSE(accepted.empty());
  const auto largest = *std::max_element(accepted.begin(), accepted.end());
  EXPECT_EQ(resource.command({"GET", key("resource")}).str(), std::to_string(largest));
}

// A server that loads each key of its dataset 100 µs late, so a restart spends a couple of
// seconds answering LOADING.
class SafetyLoading : public Safety {
 protected:
  embedded::server_options options_for(std::size_t i) const override {
    auto o = Safety::options_for(i);
    // Events (and so replies: LOADING) are processed every 1 KiB loaded, not every 2 MiB.
    o.extra_args.insert(o.extra_args.end(), {"--key-load-delay", "100",
                                             "--loading-process-events-interval-bytes", "1024"});
    return o;
  }
};

TEST_F(SafetyLoading, AWaiterRidesOutAServerLoadingItsDataAfterARestart) {
  {
    raw_redis raw(server().port());
    raw({"DEBUG", "POPULATE", "20000", key("filler")});
    raw({"SAVE"});
  }
  client c(options(1s));
  server().kill();
  // start() returns once the server answers PING, after loading. The server dies with the
  // thread that started it (PR_SET_PDEATHSIG), so that thread lives until the test ends.
  std::promise<void> test_over;
  std::thread starter([&, over = test_over.get_future()] {
    server().start();
    over.wait();
  });
  struct join_at_exit {
    std::promise<void>& over;
    std::thread& t;
    ~join_at_exit() {
      over.set_value();
      t.join();
    }
  } joiner{test_over, starter};
  wait_until([&] { return server_answers_with("LOADING"); });
  try {
    c.reentrant(key("job")).try_acquire();
    ADD_FAILURE() << "a single attempt during LOADING must report it";
  } catch (const error& e) {
    EXPECT_TRUE(e.code() == errc::server_busy || e.code() == errc::connection_lost ||
                e.code() == errc::timeout)
        << e.what();
  }
  auto l = c.reentrant(key("job")).try_acquire_for(30s);
  EXPECT_TRUE(l) << "LOADING is temporary: the wait must ride it out";
  EXPECT_TRUE(l.valid());
}

TEST_F(Safety, ErrorsThatWaitingCannotFixAreTypedAndCarryTheServersText) {
  raw_redis raw(server().port());
  // `text` is the server's, in one of its wordings (they differ between Redis and Valkey).
  auto expect_error = [](auto&& attempt, errc code, std::vector<std::string_view> text) {
    try {
      attempt();
      ADD_FAILURE() << "expected " << make_error_code(code).message();
    } catch (const error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      const std::string what = e.what();
      EXPECT_TRUE(std::any_of(text.begin(), text.end(), [&](std::string_view t) {
        return what.find(t) != what.npos;
      })) << what;
    }
  };
  // An ACL user who may not run scripts at all, and one whose scripts may not INCR.
  raw({"ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all", "-eval", "-evalsha"});
  raw({"ACL", "SETUSER", "noincr", "on", ">pw", "~*", "&*", "+@all", "-incr"});
  for (const auto* user : {"noscripts", "noincr"}) {
    auto o = options();
    o.connection.user = user;
    o.connection.password = "pw";
    client c(o);
    const std::vector<std::string_view> text =
        user == std::string("noscripts")
            ? std::vector<std::string_view>{"NOPERM"}
            : std::vector<std::string_view>{"can't run this command",             // Redis 7.0
                                            "no permissions to run the 'incr'"};  // Valkey 8
    expect_error([&] { c.reentrant(key("acl")).try_acquire_for(5s); }, errc::permission_denied,
                 text);
    // The simple lock writes its key before it draws the fence: a refused INCR must undo it.
    expect_error([&] { c.simple(key("acl-simple")).try_acquire_for(5s); }, errc::permission_denied,
                 text);
    EXPECT_EQ(raw({"EXISTS", key("acl")}).integer(), 0) << user;
    EXPECT_EQ(raw({"EXISTS", key("acl-simple")}).integer(), 0) << user;
  }
  // A fencing counter that holds something else: the simple lock's grant is undone too.
  {
    client c(url());
    raw({"SET", keys_of_lock(key("bad-counter")).fence_counter, "not a number"});
    for (const std::string kind : {"reentrant", "simple"}) {
      expect_error([&] { acquire(c, kind, key("bad-counter"), 5s); }, errc::wrong_type,
                   {"its fencing counter holds a string that is not a count"});
      EXPECT_EQ(raw({"EXISTS", key("bad-counter")}).integer(), 0) << kind;
    }
  }
  // A replica: locks need the master, and saying so beats waiting forever.
  embedded::server_options replica_options;
  replica_options.extra_args = {"--replicaof", "127.0.0.1", std::to_string(server().port())};
  embedded::redis_server replica(replica_options);
  client on_replica(replica.url());
  expect_error([&] { on_replica.simple(key("ro")).try_acquire_for(5s); }, errc::read_only,
               {"READONLY"});
  // Out of memory (noeviction): what needs memory (a new grant, a re-entry, counting a
  // re-entered hold down) is refused in the server's own words; renewals and the release that
  // ends a hold go through, as docs/safety.md says.
  client c(url());
  lease_options fixed;
  fixed.lease_time = 10s;
  auto held_reentrant = c.reentrant(key("oom-held-r")).try_acquire(fixed);
  auto held_simple = c.simple(key("oom-held-s")).try_acquire(fixed);
  ASSERT_TRUE(held_reentrant && held_simple);
  auto outer = c.reentrant(key("oom-reentered")).try_acquire(fixed);
  auto inner = c.reentrant(key("oom-reentered")).try_acquire(fixed);
  ASSERT_TRUE(outer && inner);
  raw({"CONFIG", "SET", "maxmemory", "1"});
  expect_error([&] { c.simple(key("oom")).try_acquire(); }, errc::server_error, {"OOM"});
  expect_error([&] { c.reentrant(key("oom")).try_acquire(); }, errc::server_error, {"OOM"});
  expect_error([&] { c.reentrant(key("oom-held-r")).try_acquire(fixed); }, errc::server_error,
               {"OOM"});  // a re-entry counts up: it needs memory too
  EXPECT_TRUE(held_reentrant.extend(20s));
  EXPECT_TRUE(held_simple.extend(20s));
  EXPECT_GT(raw({"PTTL", key("oom-held-s")}).integer(), 10'000);
  EXPECT_EQ(held_reentrant.release_checked(), release_outcome::released);
  EXPECT_EQ(held_simple.release_checked(), release_outcome::released);
  EXPECT_EQ(raw({"EXISTS", key("oom-held-r"), key("oom-held-s")}).integer(), 0);
  // Counting a re-entered hold down needs memory in Redis's eyes: refused, so unconfirmed.
  EXPECT_EQ(inner.release_checked(), release_outcome::unconfirmed);
  raw({"CONFIG", "SET", "maxmemory", "0"});
  outer.release();
  raw({"DEL", key("oom-reentered")});
}

TEST_F(Safety, ANameHoldingOtherDataIsReportedNotWaitedOn) {
  raw_redis raw(server().port());
  raw({"RPUSH", key("queue"), "job"});
  raw({"ZADD", key("ranks"), "1", "a"});
  raw({"SET", key("session:42"), R"({"user":42,"cart":[1,2]})", "EX", "3600"});
  raw({"HSET", key("user:7"), "name", "Ada", "email", "ada@example.com"});
  client c(url());
  const std::pair<std::string, std::string> cases[] = {
      {"queue", "holds a list, not a lock"},
      {"ranks", "holds a sorted set, not a lock"},
      {"session:42", "holds a string that is not a lock"},
      {"user:7", "holds a hash that is not a lock"}};
  for (const auto& [name, text] : cases) {
    for (const std::string kind : {"reentrant", "simple"}) {
      SCOPED_TRACE(name + " " + kind);
      try {
        acquire(c, kind, key(name), 10s);
        ADD_FAILURE() << "taken for a lock";
      } catch (const error& e) {
        EXPECT_EQ(e.code(), errc::wrong_type);
        EXPECT_NE(std::string(e.what()).find("'" + key(name) + "' " + text), std::string::npos)
            << e.what();
      }
    }
  }
  EXPECT_EQ(raw({"LLEN", key("queue")}).integer(), 1);
  EXPECT_EQ(raw({"HGET", key("user:7"), "name"}).str(), "Ada");
  // Other lock layouts are locks: each kind waits for the other, and for foreign clients'.
  raw({"SET", key("redlock"), "0123456789abcdef0123456789abcdef", "PX", "30000"});
  raw({"HSET", key("redisson"), "8743c9c0-0795-4907-87fd-6c719a6b4586:1", "1"});
  raw({"PEXPIRE", key("redisson"), "30000"});
  EXPECT_FALSE(c.reentrant(key("redlock")).try_acquire());
  EXPECT_FALSE(c.simple(key("redisson")).try_acquire());
}

TEST_F(Safety, NamesWithBracesDeriveRedissonsKeysAndHearRedissonsUnlocks) {
  const std::pair<std::string, std::string> names[] = {
      {"job{", "redisson_lock_token:job{"},     {"lock:{}", "redisson_lock_token:lock:{}"},
      {"}{x", "redisson_lock_token:}{x"},       {"a{b}c", "redisson_lock_token:a{b}c"},
      {"plain", "redisson_lock_token:{plain}"},
  };
  raw_redis raw(server().port());
  client c(url());
  for (const auto& [name, counter] : names) {
    auto l = c.reentrant(name).try_acquire();
    ASSERT_TRUE(l) << name;
    EXPECT_EQ(raw({"GET", counter}).str(), std::to_string(l.fence())) << name;
  }
  // A Redisson holder of "job{" releases: its unlock script deletes the hash and publishes 0 on
  // redisson_lock__channel:job{. A dlock waiter that re-checks only every minute must hear it.
  raw({"HSET", "wake{", "8743c9c0-0795-4907-87fd-6c719a6b4586:1", "1"});
  raw({"PEXPIRE", "wake{", "60000"});
  auto o = options();
  o.max_recheck = 60s;
  client waiter(o);
  auto got = std::async(std::launch::async,
                        [&] { return waiter.reentrant("wake{").try_acquire_for(30s); });
  wait_until([&] {
    return raw({"PUBSUB", "NUMSUB", "redisson_lock__channel:wake{"}).at(1).integer() == 1;
  });
  const auto released_at = steady::now();
  raw({"DEL", "wake{"});
  raw({"PUBLISH", "redisson_lock__channel:wake{", "0"});
  EXPECT_TRUE(got.get());
  EXPECT_LT(steady::now() - released_at, 20s) << "woken by the message, not by a re-check";
}

TEST_F(Safety, AReleaseSaysWhetherTheLockWasHeldToTheEnd) {
  auto o = options(300ms);
  client c(o);
  auto kept = c.simple(key("kept")).try_acquire();
  EXPECT_EQ(kept.release_checked(), release_outcome::released);
  EXPECT_EQ(kept.release_checked(), release_outcome::not_held) << "empty after the release";
  auto taken = c.reentrant(key("taken")).try_acquire();
  ASSERT_TRUE(taken);
  client(url()).reentrant(key("taken")).force_unlock();
  EXPECT_EQ(taken.release_checked(), release_outcome::not_held);
  auto stranded = c.simple(key("stranded")).try_acquire();
  ASSERT_TRUE(stranded);
  server().pause();
  EXPECT_EQ(stranded.release_checked(), release_outcome::unconfirmed);
  server().resume();
}

// A grant too few replicas acknowledged is undone, and the wait ends with errc::not_replicated;
// a client closed at once, as a command-line run exits, still sends that undo and waits for it,
// rather than leaving the name held for a whole lease after the process is gone.
TEST_F(Safety, AnUnreplicatedGrantIsUndoneEvenWhenItsClientClosesAtOnce) {
  raw_redis raw(server().port());
  for (const std::string kind : {"reentrant", "simple"}) {
    SCOPED_TRACE(kind);
    auto o = options();
    o.min_replica_acks = 1;  // this server has no replica: never acknowledged
    o.replica_ack_timeout = 200ms;
    for (int i = 0; i < 5; ++i) {
      {
        client c(o);
        try {
          acquire(c, kind, key(kind), 100ms);
          ADD_FAILURE() << "granted without a replica";
        } catch (const error& e) {
          EXPECT_EQ(e.code(), errc::not_replicated) << e.what();
        }
      }
      EXPECT_EQ(raw({"EXISTS", key(kind)}).integer(), 0) << "held after its client closed";
    }
  }
}

}  // namespace
}  // namespace dlock::testing
