// GoogleTest fixtures that run real redis-server processes: started on ephemeral loopback ports
// in temporary directories before each test, stopped by PID after it, pass or fail (and killed
// by the kernel if the test process dies first).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/redis/reply.hpp"
#include "embedded/process.hpp"
#include "embedded/redis_server.hpp"

namespace dlock::testing {

/// One fixture, N servers (default 1). Override `server_count` or `options_for` in a subclass.
class redis_test : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  virtual std::size_t server_count() const { return 1; }
  virtual embedded::server_options options_for(std::size_t /*index*/) const { return {}; }

  embedded::redis_server& server(std::size_t i = 0) { return *servers_.at(i); }
  std::string url(std::size_t i = 0) { return server(i).url(); }
  /// A key unique to this test: "<Suite>.<Test>:<name>".
  std::string key(std::string_view name) const;

 private:
  std::vector<std::unique_ptr<embedded::redis_server>> servers_;
  std::string prefix_;
};

/// True if `text` is a server's ACL refusal, in the words of either server family: "NOPERM ...",
/// and inside a script "ERR The user executing the script can't ..." (Redis 7.0) or "ERR ACL
/// failure in script: ..." (Valkey 8).
inline bool is_acl_refusal(std::string_view text) {
  return text.starts_with("NOPERM") || text.find("user executing the script") != text.npos ||
         text.find("ACL failure in script") != text.npos;
}

/// A deliberately simple blocking client, independent of the code under test, for setting up and
/// checking server state from the outside. Throws std::runtime_error on any failure.
class raw_redis {
 public:
  explicit raw_redis(std::uint16_t port);
  ~raw_redis();
  raw_redis(const raw_redis&) = delete;
  raw_redis& operator=(const raw_redis&) = delete;
  reply operator()(const std::vector<std::string>& args);

 private:
  int fd_ = -1;
  std::string pending_;
};

/// A throwaway certificate authority plus a server certificate for localhost/127.0.0.1 and a
/// client certificate, generated with the openssl command-line tool into `dir`.
struct test_ca {
  explicit test_ca(const std::string& dir);
  std::string ca_cert, server_cert, server_key, client_cert, client_key;
};

}  // namespace dlock::testing
