// The connection layer against real redis-server processes: pipelining under many threads,
// failures and recovery, authentication, TLS, unix sockets, scripts and pub/sub.
#include <gtest/gtest.h>

#include <array>
#include <asio/io_context.hpp>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "dlock/dlock.hpp"
#include "net/transport.hpp"
#include "redis_fixture.hpp"
#include "sanitizers.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

/// Collects pub/sub messages and lets a test wait for them.
class inbox {
 public:
  message_handler handler() {
    return [this](std::string_view channel, std::string_view message) {
      std::lock_guard lock(mutex_);
      messages_.emplace_back(std::string(channel), std::string(message));
      cv_.notify_all();
    };
  }
  /// Waits until `n` messages have arrived (or 10 s) and returns what arrived.
  std::vector<std::pair<std::string, std::string>> wait_for(std::size_t n) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, 10s, [&] { return messages_.size() >= n; });
    return messages_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, std::string>> messages_;
};

using RedisClient = redis_test;

TEST_F(RedisClient, RoundTripsEveryReplyKind) {
  redis_client c(url());
  EXPECT_EQ(c.command({"PING"}), reply::simple_string("PONG"));
  EXPECT_EQ(c.command({"SET", key("k"), "v"}).str(), "OK");
  EXPECT_EQ(c.command({"GET", key("k")}), reply::bulk_string("v"));
  EXPECT_TRUE(c.command({"GET", key("missing")}).is_nil());
  EXPECT_EQ(c.command({"INCRBY", key("n"), "41"}).integer(), 41);
  c.command({"RPUSH", key("list"), "a", "b", ""});
  const auto list = c.command({"LRANGE", key("list"), "0", "-1"});
  ASSERT_EQ(list.elements().size(), 3u);
  EXPECT_EQ(list.at(2).str(), "");
  const std::string binary("a\0b\r\nc", 6);
  c.command({"SET", key("bin"), binary});
  EXPECT_EQ(c.command({"GET", key("bin")}).str(), binary);
}

TEST_F(RedisClient, ServerErrorsAreTypedAndCarryTheServerText) {
  redis_client c(url());
  c.command({"RPUSH", key("list"), "x"});
  try {
    c.command({"GET", key("list")});
    FAIL() << "expected WRONGTYPE";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
    EXPECT_NE(std::string(e.what()).find("WRONGTYPE"), std::string::npos);
  }
  try {
    c.command({"NOSUCHCOMMAND"});
    FAIL() << "expected an error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::server_error);
    EXPECT_NE(std::string(e.what()).find("unknown command"), std::string::npos);
  }
  // The connection is still fine afterwards.
  EXPECT_EQ(c.command({"PING"}).str(), "PONG");
}

TEST_F(RedisClient, AsyncCallbackAndFutureBesideSync) {
  redis_client c(url());
  std::promise<std::pair<std::error_code, reply>> got;
  c.command_async({"ECHO", "hello"}, [&](std::error_code ec, reply r) {
    got.set_value({ec, std::move(r)});
  });
  auto [ec, r] = got.get_future().get();
  EXPECT_FALSE(ec);
  EXPECT_EQ(r.str(), "hello");

  const std::string_view args[] = {"ECHO", "world"};
  EXPECT_EQ(c.command_future(args).get().str(), "world");

  const std::string text_key = key("text");
  const std::string_view bad[] = {"INCR", text_key};
  c.command({"SET", text_key, "abc"});
  auto failing = c.command_future(bad);
  EXPECT_THROW(failing.get(), error);
}

// A caller that sends one command without waiting and then waits for the next, over and over
// (a release sent without waiting, then the next acquisition), usually sends the second while
// the first is in flight and nobody waits: from its own thread, not through the I/O thread.
// Every reply still reaches its own command, in order. (Which thread sent it is not visible
// from outside; the order is what this checks.)
TEST_F(RedisClient, ACommandSentBehindOneNobodyWaitsForKeepsTheOrder) {
  redis_client c(url());
  const std::string counter = key("counter");
  constexpr int rounds = 20'000;
  std::atomic<int> async_replies{0};
  std::atomic<int> mismatches{0};
  for (int i = 0; i < rounds; ++i) {
    const std::int64_t expected_async = 2 * i + 1;
    c.command_async({"INCR", counter}, [&, expected_async](std::error_code ec, reply r) {
      if (ec || !r.is_integer() || r.integer() != expected_async) ++mismatches;
      ++async_replies;
    });
    // Replies come back in order: the asynchronous one's callback has run before this returns.
    if (c.command({"INCR", counter}).integer() != 2 * i + 2) ++mismatches;
    if (async_replies.load() != i + 1) ++mismatches;
  }
  EXPECT_EQ(mismatches.load(), 0);
  const auto stats = c.counters();
  EXPECT_EQ(stats.replies, stats.commands_sent);
  EXPECT_EQ(stats.commands_sent, static_cast<std::uint64_t>(2 * rounds));
}

// 64 threads x 10,000 commands through one client: every reply reaches the caller that asked
// (each checks its own unique values) and pipelining puts many commands in each write.
TEST_F(RedisClient, SixtyFourThreadsShareOneConnectionWithPipelining) {
  redis_client c(url());
  constexpr int threads = 64;
  constexpr int per_thread = fewer_under_sanitizers(10'000, 10);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const std::string counter = key("counter:" + std::to_string(t));
      for (int i = 0; i < per_thread; ++i) {
        if (i % 2 == 0) {
          const std::string payload = std::to_string(t) + ":" + std::to_string(i);
          if (c.command({"ECHO", payload}).str() != payload) ++mismatches;
        } else {
          // INCR returns this thread's own running count: a reply delivered to the wrong
          // caller would break the sequence.
          if (c.command({"INCR", counter}).integer() != (i + 1) / 2) ++mismatches;
        }
      }
    });
  }
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(mismatches.load(), 0);
  const auto stats = c.counters();
  EXPECT_EQ(stats.commands_sent, static_cast<std::uint64_t>(threads) * per_thread);
  EXPECT_EQ(stats.replies, stats.commands_sent);
  // Sixty-four callers with one command each in flight: every write after the first carries
  // what was submitted while the previous one was on the wire (a one-command-per-write client
  // would show writes == commands).
  EXPECT_LT(stats.writes * 2, stats.commands_sent)
      << "writes=" << stats.writes << " commands=" << stats.commands_sent;
  std::cout << "[ info ] " << stats.commands_sent << " commands in " << stats.writes << " writes\n";
}

TEST_F(RedisClient, ScriptsRunBySha1AndRecoverFromScriptFlush) {
  redis_client c(url());
  const script s("return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}");
  auto r = c.eval(s, {key("n")}, {"arg"});
  EXPECT_EQ(r.at(0).str(), key("n"));
  EXPECT_EQ(r.at(1).str(), "arg");
  EXPECT_EQ(r.at(2).integer(), 1);
  const auto retries_before = c.counters().noscript_retries;
  // The first call sent the script in full (EVAL); now EVALSHA hits.
  EXPECT_EQ(c.eval(s, {key("n")}, {"x"}).at(2).integer(), 2);
  EXPECT_EQ(c.counters().noscript_retries, retries_before);
  c.command({"SCRIPT", "FLUSH"});
  EXPECT_EQ(c.eval(s, {key("n")}, {"x"}).at(2).integer(), 3);
  EXPECT_EQ(c.counters().noscript_retries, retries_before + 1);
  // A script that fails at run time is a typed server error with the server's message.
  const script broken("return redis.call('NOSUCHCOMMAND')");
  try {
    c.eval(broken, {}, {});
    FAIL() << "expected a script error";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::server_error);
  }
}

TEST_F(RedisClient, CommandTimeoutWhileServerPausedThenRecovers) {
  redis_client c(url());
  c.command({"SET", key("k"), "before"});
  server().pause();
  try {
    c.command({"GET", key("k")}, 200ms);
    FAIL() << "expected a timeout";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::timeout);
  }
  server().resume();
  // The late reply to the timed-out GET is discarded; each later call gets its own reply.
  EXPECT_EQ(c.command({"ECHO", "after"}).str(), "after");
  EXPECT_EQ(c.command({"GET", key("k")}).str(), "before");
  EXPECT_EQ(c.counters().timeouts, 1u);
}

// The server dies under load: calls in flight fail at once with connection_lost (the command
// timeout is far longer, so a timeout would show as a different error); the client reconnects
// when the server is back, scripts are reloaded transparently and subscriptions resume.
TEST_F(RedisClient, ServerKilledAndRestartedMidRun) {
  auto o = connection_options::from_url(url());
  o.command_timeout = 60s;
  redis_client c(o);
  const script s("return redis.call('INCR', KEYS[1])");
  EXPECT_EQ(c.eval(s, {key("n")}, {}).integer(), 1);
  inbox box;
  auto sub = c.subscribe(key("chan"), box.handler());

  std::atomic<bool> stop{false};
  std::atomic<int> ok{0};
  std::mutex mutex;
  std::condition_variable failed;
  std::vector<std::error_code> failures;
  std::vector<std::thread> load;
  for (int t = 0; t < 8; ++t) {
    load.emplace_back([&] {
      while (!stop) {
        try {
          c.command({"PING"});
          ++ok;
        } catch (const error& e) {
          std::lock_guard lock(mutex);
          failures.push_back(e.code());
          failed.notify_all();
        }
      }
    });
  }
  while (ok < 1000)
    std::this_thread::yield();
  server().kill();
  {
    // With a 60 s command timeout, only the drop itself can fail a call this soon. Calls in
    // flight at the drop fail; if, on a slow machine, none happened to be in flight, the client
    // noticing the drop is the event to wait for (later calls wait for the reconnect).
    const auto limit = std::chrono::steady_clock::now() + 30s;
    std::unique_lock lock(mutex);
    while (failures.empty() && c.connected()) {
      ASSERT_LT(std::chrono::steady_clock::now(), limit) << "the drop went unnoticed";
      failed.wait_for(lock, 10ms);
    }
  }
  server().start();
  // Issued while the client may still be reconnecting: it waits for the reconnect.
  EXPECT_EQ(c.command({"PING"}, 10s).str(), "PONG");
  stop = true;
  for (auto& t : load)
    t.join();
  EXPECT_LE(failures.size(), 8u) << "each thread has at most one call outstanding at the drop";
  for (const auto& ec : failures) {
    EXPECT_TRUE(ec == errc::connection_lost) << ec.message();
  }
  EXPECT_GE(c.counters().reconnects, 1u);
  // The restarted server has no scripts: after a reconnect a script's first call carries its
  // body (EVAL), so there is no NOSCRIPT to recover from, and calls stay in order.
  const auto retries = c.counters().noscript_retries;
  EXPECT_EQ(c.eval(s, {key("n")}, {}).integer(), 1);
  EXPECT_EQ(c.eval(s, {key("n")}, {}).integer(), 2);
  EXPECT_EQ(c.counters().noscript_retries, retries);

  // The subscriber reconnects and re-subscribes on its own; once the server counts a
  // subscriber again, a message gets through.
  raw_redis raw(server().port());
  const auto resubscribed_by = std::chrono::steady_clock::now() + 10s;
  while (raw({"PUBSUB", "NUMSUB", key("chan")}).at(1).integer() == 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), resubscribed_by) << "never re-subscribed";
    std::this_thread::sleep_for(5ms);
  }
  raw({"PUBLISH", key("chan"), "after restart"});
  const auto got = box.wait_for(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].second, "after restart");
}

TEST_F(RedisClient, PubSubChannelsAndPatterns) {
  redis_client c(url());
  inbox exact, pattern;
  auto s1 = c.subscribe(key("news"), exact.handler());
  auto s2 = c.psubscribe(key("ne*"), pattern.handler());
  EXPECT_EQ(c.command({"PUBLISH", key("news"), "one"}).integer(), 2);
  EXPECT_EQ(exact.wait_for(1).at(0).second, "one");
  const auto p = pattern.wait_for(1);
  EXPECT_EQ(p.at(0).first, key("news"));
  EXPECT_EQ(p.at(0).second, "one");
  s1.reset();
  // After reset the handler is gone and the server forgets the channel.
  EXPECT_EQ(c.command({"PUBLISH", key("news"), "two"}).integer(), 1);
  EXPECT_EQ(pattern.wait_for(2).size(), 2u);
  EXPECT_EQ(exact.wait_for(1).size(), 1u);
  EXPECT_THROW(c.subscribe("", exact.handler()), error);
}

TEST_F(RedisClient, UnixSocketRoundTrip) {
  redis_client c("unix://" + server().unix_socket());
  EXPECT_EQ(c.command({"PING"}).str(), "PONG");
  c.command({"SET", key("k"), "via unix"});
  raw_redis raw(server().port());
  EXPECT_EQ(raw({"GET", key("k")}).str(), "via unix");
}

TEST_F(RedisClient, SelectsTheDatabaseAndNamesTheConnection) {
  redis_client c(url() + "/3?name=orders-service");
  c.command({"SET", key("k"), "in db 3"});
  raw_redis raw(server().port());
  EXPECT_TRUE(raw({"GET", key("k")}).is_nil());
  raw({"SELECT", "3"});
  EXPECT_EQ(raw({"GET", key("k")}).str(), "in db 3");
  EXPECT_NE(raw({"CLIENT", "LIST"}).str().find("name=orders-service"), std::string::npos);
}

TEST_F(RedisClient, ConnectFailuresAreTyped) {
  auto o = connection_options::from_url(url());
  server().stop();
  try {
    redis_client c(o);
    FAIL() << "expected connect_failed";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::connect_failed);
    EXPECT_NE(std::string(e.what()).find(std::to_string(server().port())), std::string::npos);
  }
  server().start();
  try {
    redis_client c(url() + "/100000");
    FAIL() << "expected a SELECT failure";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::server_error);
  }
}

TEST_F(RedisClient, BadUrlsNameWhatIsWrongWithoutThePassword) {
  const char* bad[] = {
      "http://host",                    // scheme
      "redis://user:hunter2@host:0",    // port
      "redis://user:hunter2@host:abc",  // port
      "redis://user:hunter2@:6379",     // host
      "redis://user:hunter2@host/x",    // database
      "redis://user:hunter2@host?bogus=1",
      "redis://user:hunter2:6379",  // '@' forgotten: the password lands in the port
      "unix://relative/path",
  };
  for (const char* u : bad) {
    try {
      redis_client c(u);
      ADD_FAILURE() << "accepted " << u;
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_url) << u;
      EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
    }
  }
}

// ---- authentication ----

class RedisClientAuth : public redis_test {
 protected:
  embedded::server_options options_for(std::size_t) const override {
    embedded::server_options o;
    // redis-server joins the words after a --directive into one config line.
    o.extra_args = {"--requirepass",
                    "s3cret-default",
                    "--user",
                    "alice",
                    "on",
                    ">wonder%land",
                    "~*",
                    "&*",
                    "+@all",
                    "--user",
                    "bob",
                    "on",
                    ">builder",
                    "~bob:*",
                    "+get"};
    return o;
  }
  std::string host_port() { return "127.0.0.1:" + std::to_string(server().port()); }
};

TEST_F(RedisClientAuth, PasswordAndAclUsers) {
  redis_client legacy("redis://:s3cret-default@" + host_port());
  EXPECT_EQ(legacy.command({"PING"}).str(), "PONG");
  // Percent-escapes in the password are decoded ("%25" is "%").
  redis_client alice("redis://alice:wonder%25land@" + host_port());
  EXPECT_EQ(alice.command({"ACL", "WHOAMI"}).str(), "alice");
  // An ACL user limited by its rules gets a typed error, not a broken connection.
  redis_client bob("redis://bob:builder@" + host_port());
  EXPECT_THROW(bob.command({"SET", "bob:x", "1"}), error);
  EXPECT_TRUE(bob.command({"GET", "bob:x"}).is_nil());
}

TEST_F(RedisClientAuth, WrongOrMissingCredentialsAreTypedAndNeverEchoed) {
  const std::string urls[] = {
      "redis://:not-the-password@" + host_port(), "redis://alice:not-the-password@" + host_port(),
      "redis://nobody:not-the-password@" + host_port(),
      "redis://" + host_port(),  // no credentials at all: NOAUTH
  };
  for (const auto& u : urls) {
    try {
      redis_client c(u);
      ADD_FAILURE() << "connected with " << u;
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::auth_failed) << u << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).find("not-the-password"), std::string::npos) << e.what();
    }
  }
}

// ---- TLS ----

class RedisClientTls : public redis_test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dlock-ca-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    ca_dir_ = tmpl;
    ca_ = std::make_unique<test_ca>(ca_dir_);
    redis_test::SetUp();
  }
  void TearDown() override {
    redis_test::TearDown();
    std::error_code ignored;
    std::filesystem::remove_all(ca_dir_, ignored);
  }
  embedded::server_options options_for(std::size_t) const override {
    embedded::server_options o;
    o.tls_cert_file = ca_->server_cert;
    o.tls_key_file = ca_->server_key;
    o.tls_ca_file = ca_->ca_cert;
    return o;
  }
  std::string tls_url(const std::string& host) {
    return "rediss://" + host + ":" + std::to_string(server().tls_port()) + "?ca=" + ca_->ca_cert;
  }
  std::string ca_dir_;
  std::unique_ptr<test_ca> ca_;
};

TEST_F(RedisClientTls, RoundTripWithVerification) {
  redis_client c(tls_url("localhost"));
  EXPECT_EQ(c.command({"PING"}).str(), "PONG");
  c.command({"SET", key("k"), "over tls"});
  EXPECT_EQ(c.command({"GET", key("k")}).str(), "over tls");
  inbox box;
  auto sub = c.subscribe(key("chan"), box.handler());
  c.command({"PUBLISH", key("chan"), "hi"});
  EXPECT_EQ(box.wait_for(1).at(0).second, "hi");
}

TEST_F(RedisClientTls, ClientCertificateIsPresented) {
  redis_client c(tls_url("127.0.0.1") + "&cert=" + ca_->client_cert + "&key=" + ca_->client_key);
  EXPECT_EQ(c.command({"PING"}).str(), "PONG");
}

TEST_F(RedisClientTls, UntrustedCertificateIsRejectedUnlessVerificationIsOff) {
  // The system trust store does not know our throwaway CA.
  const std::string untrusted = "rediss://localhost:" + std::to_string(server().tls_port());
  try {
    redis_client c(untrusted);
    FAIL() << "connected to an untrusted server";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::tls_failed) << e.what();
  }
  // The certificate names localhost and 127.0.0.1, not this name.
  try {
    redis_client c(tls_url("localhost") + "&sni=wrong.example");
    FAIL() << "accepted a certificate for another name";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::tls_failed) << e.what();
  }
  redis_client insecure(untrusted + "?verify=none");
  EXPECT_EQ(insecure.command({"PING"}).str(), "PONG");
  // A missing CA file is reported as such.
  try {
    redis_client c(tls_url("localhost") + "-missing");
    FAIL() << "loaded a missing CA file";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::tls_failed);
  }
}

// No handler given to a transport runs after its close(): the connection that gave them may be
// gone by then (a cluster or sentinel topology lets a node's client go while the shared I/O
// thread goes on), and a TLS read or write can finish its cancellation a hop after a plain one.
// Before this held, both handlers below ran with operation_aborted.
TEST_F(RedisClientTls, ATransportCallsNoHandlerAfterClose) {
  for (const bool tls : {false, true}) {
    SCOPED_TRACE(tls ? "TLS" : "TCP");
    asio::io_context io;
    connection_options o;
    o.host = "localhost";
    o.port = tls ? server().tls_port() : server().port();
    o.tls.enabled = tls;
    o.tls.ca_file = ca_->ca_cert;
    auto t = net::make_transport(io, o, tls ? net::make_tls_context(o.tls) : nullptr);
    bool connected = false;
    t->async_connect([&](std::error_code ec, const std::string& detail) {
      EXPECT_FALSE(ec) << detail;
      connected = true;
    });
    while (!connected && io.run_one() > 0) {
    }
    ASSERT_TRUE(connected);

    std::array<char, 64> room{};
    static const std::string ping = "*1\r\n$4\r\nPING\r\n";
    int reads = 0, writes = 0;
    t->async_read_some(asio::buffer(room), [&](std::error_code, std::size_t) { ++reads; });
    t->async_write(asio::buffer(ping), [&](std::error_code, std::size_t) { ++writes; });
    t->close();
    t.reset();     // the pending operations keep it alive until they complete
    io.restart();  // run_one() stopped it when the connect left nothing pending
    EXPECT_GE(io.run(), 2u) << "the cancelled read and write completed";
    EXPECT_EQ(reads, 0);
    EXPECT_EQ(writes, 0);
  }
}

}  // namespace
}  // namespace dlock::testing
