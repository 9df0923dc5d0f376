// client_options::command_connections: a client spreads lock names over several command
// connections to one server, each name always on the same one, so a name's calls still run in
// the order the client sent them.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "embedded/redis_cluster.hpp"
#include "polling.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

// `prefix` then `n` (appended: GCC 12's -Wrestrict misfires on "literal" + std::string&&).
std::string numbered(std::string prefix, std::size_t n) {
  prefix += std::to_string(n);
  return prefix;
}

// The script calls a server ran, in order, with the connection each came on: MONITOR, read on
// a socket of its own.
class call_monitor {
 public:
  explicit call_monitor(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::send(fd_, "MONITOR\r\n", 9, MSG_NOSIGNAL) != 9 || next_line() != "+OK") {
      throw std::runtime_error("MONITOR did not start");
    }
  }
  ~call_monitor() {
    if (fd_ >= 0) ::close(fd_);
  }

  /// Marks the end of the stream and returns every script call before the mark (not a
  /// script's inner commands): who sent it ("<db> <address>") and the line.
  std::vector<std::pair<std::string, std::string>> script_calls(raw_redis& raw) {
    raw({"ECHO", "call-monitor-end"});
    std::vector<std::pair<std::string, std::string>> out;
    for (std::string line = next_line(); line.find("call-monitor-end") == std::string::npos;
         line = next_line()) {
      const auto open = line.find(" [");
      const auto close = line.find("] ", open);
      if (open == std::string::npos || close == std::string::npos) continue;
      const auto who = line.substr(open + 2, close - open - 2);
      if (who.find(" lua") != std::string::npos) continue;  // inside a script
      if (line.compare(close + 2, 9, "\"EVALSHA\"") == 0 ||
          line.compare(close + 2, 6, "\"EVAL\"") == 0) {
        out.emplace_back(who, line);
      }
    }
    return out;
  }

 private:
  std::string next_line() {
    for (;;) {
      const auto end = buffer_.find("\r\n");
      if (end != std::string::npos) {
        std::string line = buffer_.substr(0, end);
        buffer_.erase(0, end + 2);
        return line;
      }
      char chunk[4096];
      const auto n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) throw std::runtime_error("MONITOR stream ended");
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  int fd_ = -1;
  std::string buffer_;
};

class CommandConnections : public redis_test {
 protected:
  client_options options(std::size_t connections, const std::string& name) {
    auto o = client_options::from_url(url());
    o.connection.client_name = name;
    o.command_connections = connections;
    return o;
  }

  // The server's view of the connections named `name`: the last command of each.
  std::vector<std::string> last_commands(const std::string& name) {
    std::istringstream list(raw_redis(server().port())({"CLIENT", "LIST"}).str());
    std::vector<std::string> out;
    for (std::string line; std::getline(list, line);) {
      if (line.find(" name=" + name + " ") == std::string::npos) continue;
      std::istringstream fields(line);
      for (std::string field; fields >> field;) {
        if (field.rfind("cmd=", 0) == 0) out.push_back(field.substr(4));
      }
    }
    return out;
  }
};

TEST_F(CommandConnections, NamesSpreadOverAsManyConnectionsAsAsked) {
  for (const std::size_t n : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
    const std::string name = numbered("lanes-", n);
    client c(options(n, name));
    // Enough names to land on every connection (by cluster hash slot).
    for (int i = 0; i < 64; ++i) {
      auto l = c.simple(key(numbered("spread:", static_cast<std::size_t>(i)))).acquire();
      ASSERT_TRUE(l);
      ASSERT_TRUE(l.release());
    }
    const auto cmds = last_commands(name);
    EXPECT_EQ(cmds.size(), n) << "command connections of a client asked for " << n;
    for (const auto& cmd : cmds)
      EXPECT_TRUE(cmd == "evalsha" || cmd == "eval")
          << "a connection carried no lock call: " << cmd;
  }
}

TEST_F(CommandConnections, OutOfRangeCountsAreRefused) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{65}}) {
    try {
      client c(options(n, "refused"));
      FAIL() << n << " command connections were accepted";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("command_connections"), std::string::npos) << e.what();
    }
  }
}

// Threads of one client release without waiting and take the same name again at once, on many
// names spread over four connections: each release must run before the same name's next
// acquisition (a fresh hold, count 1, a larger fence), never after it.
TEST_F(CommandConnections, ANamesReleaseNeverRunsAfterItsNextAcquisition) {
  client c(options(4, "ordered"));
  constexpr int threads = 8;
  constexpr int rounds = 300;
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto lock = c.reentrant(key(numbered("ordered:", static_cast<std::size_t>(t))));
      std::uint64_t last_fence = 0;
      for (int i = 0; i < rounds; ++i) {
        auto l = lock.acquire();
        if (!l || l.fence() <= last_fence || lock.hold_count() != 1) ++failures;
        last_fence = l.fence();
        l.release_async();
      }
    });
  }
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(failures.load(), 0) << "a release ran after the same name's next acquisition";
  EXPECT_EQ(c.stats().release_failures, 0u);
}

// A multi-lock's one call whose reply never came is undone by one call on the same connection,
// so that it runs after the call it undoes. The first name (they are taken sorted) is on the
// connection opened last, the others on the first one: undone name by name, each on its own
// name's connection, the undo could reach the server first and leave the late grants for a
// whole lease. MONITOR shows which connection each call came on.
TEST_F(CommandConnections, AMultiLockCallThatTimedOutIsUndoneBehindItOnItsConnection) {
  std::vector<std::string> names;
  for (std::size_t i = 0; names.size() < 3 && i < 1000; ++i) {
    const auto name = key(numbered("m", 1000 + i));
    const bool last_lane = embedded::redis_cluster::key_slot(name) % 2 == 1;
    if (names.empty() ? last_lane : !last_lane) names.push_back(name);
  }
  ASSERT_EQ(names.size(), 3u);
  // The wait (200 ms) ends the call long before the connection would be given up as stalled
  // (a command timeout, 5 s): the undo is written behind it on a live connection.
  client c(options(2, "multi-undo"));
  // Both connections up before the server stops: the second connects in the background once the
  // first has, and a call still waiting for it would time out unsent.
  for (const auto& name : {names[0], names[1]})
    ASSERT_TRUE(c.reentrant(name).acquire().release());
  raw_redis raw(server().port());
  call_monitor monitor(server().port());
  server().pause();
  auto held = c.multi(names).try_acquire_for(200ms, {.owner = "worker"});
  EXPECT_FALSE(held) << "granted by a stopped server";
  server().resume();
  // The late call grants every name, then the undo removes them; left behind, they would stay
  // for the 30 s watchdog lease.
  wait_until([&] { return raw({"EXISTS", names[0], names[1], names[2]}).integer() == 0; }, 10s);
  const auto calls = monitor.script_calls(raw);
  for (const auto& name : names) {
    std::vector<std::string> callers;
    for (const auto& [who, line] : calls) {
      if (line.find('"' + name + '"') != std::string::npos) callers.push_back(who);
    }
    ASSERT_EQ(callers.size(), 2u) << name << ": the call and its undo";
    EXPECT_EQ(callers[0], callers[1]) << name << ": the undo came on another connection";
  }
}

}  // namespace
}  // namespace dlock::testing
