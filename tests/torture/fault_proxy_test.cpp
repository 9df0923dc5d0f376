// The fault proxy against a real redis-server: each fault does what the torture harness relies
// on, seen through dlock's own redis_client (and a raw socket where the client would hide it).
#include "fault_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "redis_fixture.hpp"

namespace dlock::torture {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using dlock::testing::raw_redis;

class FaultProxy : public dlock::testing::redis_test {
 protected:
  void SetUp() override {
    redis_test::SetUp();
    proxy_ = std::make_unique<fault_proxy>(server().port());
  }
  void TearDown() override {
    proxy_.reset();
    redis_test::TearDown();
  }

  connection_options through_proxy(std::chrono::milliseconds command_timeout = 2s,
                                   std::string name = "through-proxy") {
    connection_options o;
    o.port = proxy_->port();
    o.client_name = std::move(name);
    o.connect_timeout = 500ms;
    o.command_timeout = command_timeout;
    return o;
  }

  /// Clients the server sees with this CLIENT SETNAME, asked directly (not through the proxy).
  int clients_named(const std::string& name) {
    const auto list = raw_redis(server().port())({"CLIENT", "LIST"}).str();
    int n = 0;
    for (std::size_t at = 0; (at = list.find("name=" + name + " ", at)) != std::string::npos;
         ++at) {
      ++n;
    }
    return n;
  }

  /// Until `done` holds or `limit` passes; the condition is what the test waits for.
  template <class Check>
  static bool eventually(Check done, std::chrono::milliseconds limit = 20s) {
    const auto deadline = steady::now() + limit;
    while (!done()) {
      if (steady::now() > deadline) return false;
      std::this_thread::sleep_for(2ms);
    }
    return true;
  }

  static std::chrono::milliseconds time_of(const std::function<void()>& f) {
    const auto start = steady::now();
    f();
    return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - start);
  }

  std::unique_ptr<fault_proxy> proxy_;
};

TEST_F(FaultProxy, ForwardsCommandsBothWays) {
  redis_client c(through_proxy());
  EXPECT_EQ(c.command({"SET", key("k"), "v"}).str(), "OK");
  EXPECT_EQ(c.command({"GET", key("k")}).str(), "v");
  EXPECT_EQ(raw_redis(server().port())({"GET", key("k")}).str(), "v");
  const auto n = proxy_->counters();
  EXPECT_EQ(n.accepted, 1u);
  EXPECT_EQ(n.active, 1u);
  EXPECT_GT(n.bytes_up, 0u);
  EXPECT_GT(n.bytes_down, 0u);
}

TEST_F(FaultProxy, LatencyDelaysEveryChunkAndKeepsTheirOrder) {
  redis_client c(through_proxy());
  proxy_->set_latency(100ms, 0ms);
  // Both directions are held: a round trip cannot take less than twice the latency.
  EXPECT_GE(time_of([&] { c.command({"PING"}); }), 200ms);

  // With jitter each chunk waits a different time, yet none may overtake another: replies to
  // pipelined INCRs come back in the order sent, or the client would mismatch them.
  proxy_->set_latency(0ms, 30ms);
  const std::string counter = key("counter");
  std::vector<std::future<reply>> replies;
  const std::string_view incr[] = {"INCR", counter};
  for (int i = 0; i < 200; ++i)
    replies.push_back(c.command_future(incr));
  for (int i = 0; i < 200; ++i)
    EXPECT_EQ(replies[static_cast<std::size_t>(i)].get().integer(), i + 1);

  proxy_->set_latency(0ms, 0ms);
  EXPECT_LT(time_of([&] { c.command({"PING"}); }), 200ms);
}

TEST_F(FaultProxy, StallDelaysButDelivers) {
  redis_client c(through_proxy(5s));
  c.command({"PING"});
  proxy_->stall_for(500ms);
  std::chrono::milliseconds took{};
  EXPECT_NO_THROW(took = time_of([&] { c.command({"SET", key("k"), "after the stall"}); }));
  EXPECT_GE(took, 450ms);
  EXPECT_EQ(raw_redis(server().port())({"GET", key("k")}).str(), "after the stall");
  EXPECT_EQ(proxy_->counters().accepted, 1u) << "the connection survived the stall";
}

TEST_F(FaultProxy, HalfOpenTimesOutWithoutClosingTheSocket) {
  redis_client c(through_proxy(300ms, "victim"));
  c.command({"PING"});
  ASSERT_EQ(clients_named("victim"), 1);
  proxy_->half_open_for(1500ms);

  try {
    c.command({"PING"});
    FAIL() << "a black hole answered";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::timeout);
  }
  // The server side was closed while the client's socket stayed open, without a FIN or RST:
  // nothing told the client. It gives up on the silent connection by itself (a command timeout
  // without a byte back) and reconnects, into the black hole again while the window lasts.
  EXPECT_TRUE(eventually([&] { return clients_named("victim") == 0; }));
  EXPECT_TRUE(eventually([&] { return c.counters().connection_losses >= 1; }));
  const auto n = proxy_->counters();
  EXPECT_GE(n.black_holed, 1u);
  EXPECT_GT(n.bytes_dropped, 0u);

  // A connection made during the window is a black hole from the start: its handshake times
  // out.
  EXPECT_THROW(redis_client(through_proxy(300ms, "during")), error);
  EXPECT_EQ(clients_named("during"), 0);
}

// No data, no FIN, no RST: seen on a raw socket, since a client library may hide the difference.
TEST_F(FaultProxy, HalfOpenSendsNothingBack) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(proxy_->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_TRUE(eventually([&] { return proxy_->counters().accepted == 1; }));
  proxy_->half_open_for(10s);
  const std::string ping = "PING\r\n";
  ASSERT_EQ(::write(fd, ping.data(), ping.size()), static_cast<ssize_t>(ping.size()));
  // Absence can only be shown over a span of time: readable would mean data, EOF or an error.
  pollfd p{fd, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 500), 0);
  EXPECT_TRUE(eventually([&] { return proxy_->counters().bytes_dropped >= ping.size(); }));
  ::close(fd);
  // The client's close ends the black hole on the proxy's side too.
  EXPECT_TRUE(eventually([&] { return proxy_->counters().active == 0; }));
}

TEST_F(FaultProxy, AfterHalfOpenNewConnectionsWork) {
  redis_client before(through_proxy(300ms));
  before.command({"PING"});
  proxy_->half_open_for(300ms);
  EXPECT_THROW(before.command({"PING"}), error);
  // The window ends by itself; then connecting works again.
  std::unique_ptr<redis_client> after;
  EXPECT_TRUE(eventually([&] {
    try {
      after = std::make_unique<redis_client>(through_proxy(2s, "after"));
      return true;
    } catch (const error&) {
      return false;
    }
  }));
  ASSERT_TRUE(after);
  EXPECT_EQ(after->command({"PING"}).str(), "PONG");
}

// What a lock client must do about a half-open connection: give up on it after timeouts and
// reconnect, or every command it sends from then on disappears.
TEST_F(FaultProxy, ClientReconnectsAfterAHalfOpenConnection) {
  redis_client c(through_proxy(300ms));
  c.command({"PING"});
  proxy_->half_open_for(500ms);
  EXPECT_THROW(c.command({"PING"}), error);
  EXPECT_TRUE(eventually([&] {
    try {
      return c.command({"PING"}).str() == "PONG";
    } catch (const error&) {
      return false;
    }
  })) << "the client kept using a connection that had not answered for 20 s";
}

TEST_F(FaultProxy, WaitsShorterThanARoundTripNeverLeaveALockBehind) {
  // Round trips of ~4 ms, and threads whose waits (1 ms) end while their attempt is still out,
  // often one sent right behind a release. Whatever such an attempt brings back is undone: a
  // grant nobody was told about would hold the lock for its whole 60 s lease, and the patient
  // thread's 20 s waits would fail.
  proxy_->set_latency(2ms, 0ms);
  client_options o;
  o.connection = through_proxy(5s);
  o.watchdog_lease = 60s;
  client c(o);
  const std::string name = "fault-proxy:short-waits";
  std::atomic<bool> done{false};
  std::vector<std::thread> impatient;
  for (int t = 0; t < 3; ++t) {
    impatient.emplace_back([&] {
      auto lock = c.reentrant(name);
      while (!done)
        auto l = lock.try_acquire_for(1ms);
    });
  }
  auto lock = c.reentrant(name);
  for (int i = 0; i < 60; ++i) {
    auto l = lock.try_acquire_for(20s);
    ASSERT_TRUE(l) << "round " << i << ": the lock was left held";
  }
  done = true;
  for (auto& t : impatient)
    t.join();
  EXPECT_FALSE(c.reentrant(name).is_locked());
}

TEST_F(FaultProxy, ResetDropsTheConnectionAndTheClientReconnects) {
  redis_client c(through_proxy(15s));
  c.command({"PING"});
  // A command the server holds (BLPOP) is in flight when the connection is reset.
  auto blocked = std::async(std::launch::async, [&] {
    try {
      c.command({"BLPOP", key("never"), "10"});
      return std::error_code{};
    } catch (const error& e) {
      return e.code();
    }
  });
  ASSERT_TRUE(eventually([&] {
    const auto info = raw_redis(server().port())({"INFO", "clients"}).str();
    return info.find("blocked_clients:1") != std::string::npos;
  }));
  proxy_->reset_all();
  EXPECT_EQ(blocked.get(), errc::connection_lost);
  EXPECT_EQ(proxy_->counters().reset, 1u);
  EXPECT_TRUE(eventually([&] {
    try {
      return c.command({"PING"}).str() == "PONG";
    } catch (const error&) {
      return false;
    }
  }));
  EXPECT_GE(c.counters().reconnects, 1u);
}

TEST_F(FaultProxy, RefuseRejectsNewConnectionsOnly) {
  redis_client existing(through_proxy());
  existing.command({"PING"});
  proxy_->refuse_for(1s);
  try {
    redis_client refused(through_proxy());
    FAIL() << "connected while refusing";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::connect_failed);
  }
  EXPECT_EQ(existing.command({"PING"}).str(), "PONG");
  EXPECT_TRUE(eventually([&] {
    try {
      redis_client later(through_proxy());
      return later.command({"PING"}).str() == "PONG";
    } catch (const error&) {
      return false;
    }
  }));
}

TEST_F(FaultProxy, HealEndsEveryWindowAtOnce) {
  redis_client c(through_proxy(5s));
  c.command({"PING"});
  proxy_->set_latency(2s, 0ms);
  proxy_->stall_for(60s);
  proxy_->refuse_for(60s);
  auto pending = c.command_future(std::vector<std::string_view>{"PING"});
  proxy_->heal();
  EXPECT_EQ(pending.get().str(), "PONG");  // within its 5 s timeout, not after 60
  redis_client fresh(through_proxy());
  EXPECT_EQ(fresh.command({"PING"}).str(), "PONG");
}

}  // namespace
}  // namespace dlock::torture
