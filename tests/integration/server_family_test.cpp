// Redis and Valkey: the valkey:// URL forms in the library and on the command line, and the
// client announcing itself (CLIENT SETINFO) where the server knows how. The suite as a whole runs
// on either server (DLOCK_TEST_SERVER=redis|valkey); these tests are about what tells them apart.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_support.hpp"
#include "dlock/dlock.hpp"
#include "embedded/redis_sentinel_set.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {
namespace {

using namespace std::chrono_literals;

// CLIENT SETINFO came with Redis 7.2 and is in every Valkey.
bool knows_setinfo(raw_redis& r) {
  const auto info = r({"INFO", "server"}).str();
  if (info.find("valkey_version:") != std::string::npos) return true;
  const auto at = info.find("redis_version:");
  if (at == std::string::npos) return false;
  int major = 0, minor = 0;
  std::sscanf(info.c_str() + at + 14, "%d.%d", &major, &minor);
  return major > 7 || (major == 7 && minor >= 2);
}

// The CLIENT LIST lines of connections whose name starts with "dlock:".
std::vector<std::string> dlock_connections(raw_redis& r) {
  std::vector<std::string> out;
  const auto list = r({"CLIENT", "LIST"}).str();
  for (std::size_t start = 0; start < list.size();) {
    const auto end = std::min(list.find('\n', start), list.size());
    const auto line = list.substr(start, end - start);
    if (line.find(" name=dlock:") != std::string::npos) out.push_back(line);
    start = end + 1;
  }
  return out;
}

std::string with_scheme(std::string url, const std::string& scheme) {
  return scheme + url.substr(url.find("://"));
}

class ServerFamily : public redis_test {};

TEST_F(ServerFamily, TheClientNamesItsLibraryWhereTheServerKnowsHow) {
  raw_redis r(server().port());
  client c(with_scheme(url(), "valkey"));
  auto held = c.reentrant(key("job")).try_acquire();
  ASSERT_TRUE(held);
  const auto lines = dlock_connections(r);
  ASSERT_FALSE(lines.empty()) << r({"CLIENT", "LIST"}).str();
  for (const auto& line : lines) {
    if (knows_setinfo(r)) {
      EXPECT_NE(line.find(" lib-name=dlock "), std::string::npos) << line;
      EXPECT_NE(line.find(std::string(" lib-ver=") + version + " "), std::string::npos) << line;
    } else {
      // An older server refused the announcement; the connection went on without it.
      EXPECT_EQ(line.find("lib-name=dlock"), std::string::npos) << line;
    }
  }
  EXPECT_TRUE(held.release());
}

// The announcement is cosmetic: a user the ACL denies CLIENT SETINFO (and SETNAME) still locks.
TEST_F(ServerFamily, AUserDeniedTheAnnouncementStillLocks) {
  raw_redis r(server().port());
  ASSERT_EQ(r({"ACL", "SETUSER", "quiet", "on", ">pw", "~*", "&*", "+@all", "-client"}).str(),
            "OK");
  client c("valkey://quiet:pw@127.0.0.1:" + std::to_string(server().port()));
  auto held = c.simple(key("job")).try_acquire();
  EXPECT_TRUE(held);
  EXPECT_TRUE(held.release());
}

TEST_F(ServerFamily, TheCommandLineTakesValkeyUrlsAndAnnouncesItself) {
  raw_redis r(server().port());
  // The command runs while dlock holds the lock over its own connections: it lists them.
  const auto listed = dlock_cli({"--url", with_scheme(url(), "valkey"), "run", key("job"), "--",
                                 embedded::default_programs().cli, "-p",
                                 std::to_string(server().port()), "CLIENT", "LIST"});
  ASSERT_EQ(listed.code, 0) << listed.output;
  EXPECT_NE(listed.output.find(" name=dlock:"), std::string::npos) << listed.output;
  if (knows_setinfo(r)) {
    EXPECT_NE(listed.output.find(" lib-name=dlock "), std::string::npos) << listed.output;
  }
  const auto bad = dlock_cli({"--url", "valkey+tls://127.0.0.1:1", "status", "x"});
  EXPECT_EQ(bad.code, 64) << bad.output;
  EXPECT_NE(bad.output.find("valkey://"), std::string::npos) << bad.output;
}

TEST(ServerFamilySentinel, AValkeySentinelUrlFollowsTheMaster) {
  if (!embedded::sentinel_available()) GTEST_SKIP() << "no sentinel program";
  embedded::redis_sentinel_set set({.replicas = 1, .sentinels = 1});
  const auto url = with_scheme(set.url(), "valkey-sentinel");
  client c(url);
  auto held = c.reentrant("server-family:sentinel").try_acquire();
  ASSERT_TRUE(held);
  EXPECT_GT(held.fence(), 0u);
  EXPECT_TRUE(held.release());
  const auto listed = dlock_cli({"--url", url, "status", "server-family:sentinel"});
  EXPECT_NE(listed.code, 64) << listed.output;
  EXPECT_EQ(listed.output.find("invalid URL"), std::string::npos) << listed.output;
}

}  // namespace
}  // namespace dlock::testing
