#include "redis_fixture.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "wire/resp.hpp"

namespace dlock::testing {

void redis_test::SetUp() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  prefix_ = std::string(info->test_suite_name()) + "." + info->name() + ":";
  for (std::size_t i = 0; i < server_count(); ++i) {
    servers_.push_back(std::make_unique<embedded::redis_server>(options_for(i)));
  }
}

void redis_test::TearDown() {
  servers_.clear();
}

std::string redis_test::key(std::string_view name) const {
  return prefix_ + std::string(name);
}

raw_redis::raw_redis(std::uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const std::string why = std::strerror(errno);
    if (fd_ >= 0) ::close(fd_);
    throw std::runtime_error("raw_redis: cannot connect to port " + std::to_string(port) + ": " +
                             why);
  }
}

raw_redis::~raw_redis() {
  if (fd_ >= 0) ::close(fd_);
}

reply raw_redis::operator()(const std::vector<std::string>& args) {
  std::vector<std::string_view> views(args.begin(), args.end());
  std::string out;
  wire::encode_command(out, views);
  for (std::size_t sent = 0; sent < out.size();) {
    const auto n = ::write(fd_, out.data() + sent, out.size() - sent);
    if (n <= 0) throw std::runtime_error("raw_redis: write failed");
    sent += static_cast<std::size_t>(n);
  }
  wire::resp_parser parser;
  reply r;
  for (;;) {
    const auto status = parser.next(r);
    if (status == wire::resp_parser::status::reply) return r;
    if (status == wire::resp_parser::status::error) {
      throw std::runtime_error("raw_redis: " + parser.error_message());
    }
    char buf[65536];
    const auto n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) throw std::runtime_error("raw_redis: connection closed");
    parser.feed(std::string_view(buf, static_cast<std::size_t>(n)));
  }
}

test_ca::test_ca(const std::string& dir)
    : ca_cert(dir + "/ca.crt"),
      server_cert(dir + "/server.crt"),
      server_key(dir + "/server.key"),
      client_cert(dir + "/client.crt"),
      client_key(dir + "/client.key") {
  const std::string ca_key = dir + "/ca.key";
  const std::string ext = dir + "/server.ext";
  std::ofstream(ext) << "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
  auto run = [](const std::vector<std::string>& argv) {
    if (embedded::run_program(argv) != 0) {
      throw std::runtime_error("test_ca: '" + argv[0] + " " + argv[1] + "' failed");
    }
  };
  const std::vector<std::string> ec_key = {"-newkey", "ec", "-pkeyopt",
                                           "ec_paramgen_curve:prime256v1", "-nodes"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  run(with({"openssl", "req", "-x509", "-days", "2", "-subj", "/CN=dlock test CA", "-keyout",
            ca_key, "-out", ca_cert},
           ec_key));
  auto issue = [&](const std::string& cn, const std::string& key, const std::string& cert,
                   bool server) {
    const std::string csr = cert + ".csr";
    run(with({"openssl", "req", "-new", "-subj", "/CN=" + cn, "-keyout", key, "-out", csr},
             ec_key));
    std::vector<std::string> sign = {"openssl", "x509",  "-req",   "-in",  csr,
                                     "-CA",     ca_cert, "-CAkey", ca_key, "-CAcreateserial",
                                     "-days",   "2",     "-out",   cert};
    if (server) sign.insert(sign.end(), {"-extfile", ext});
    run(sign);
  };
  issue("localhost", server_key, server_cert, true);
  issue("dlock test client", client_key, client_cert, false);
}

}  // namespace dlock::testing
