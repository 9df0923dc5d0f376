#include "embedded/redis_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

namespace dlock::embedded {
namespace {

using namespace std::chrono_literals;

// Binds `port` (0: any) on loopback and returns the port bound, or 0 if it is taken.
std::uint16_t probe_port(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw server_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int e = errno;
    ::close(fd);
    if (e == EADDRINUSE && port != 0) return 0;
    throw server_error(std::string("cannot find a free port: ") + std::strerror(e));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// The kernel's ephemeral choice is free, but may be too high for a port that needs a bus port
// above it: draw again until both fit.
std::uint16_t pick_free_port(std::uint16_t max_port = 65535, std::uint16_t bus_offset = 0) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::uint16_t port = probe_port(0);
    if (port > max_port || port + bus_offset > 65535) continue;
    if (bus_offset == 0 || probe_port(static_cast<std::uint16_t>(port + bus_offset)) != 0) {
      return port;
    }
  }
  throw server_error("cannot find a free port below " + std::to_string(max_port) +
                     (bus_offset ? " with port+" + std::to_string(bus_offset) + " free" : ""));
}

bool answers_ping(const std::string& socket_path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    static const char ping[] = "PING\r\n";
    if (::write(fd, ping, sizeof ping - 1) == static_cast<ssize_t>(sizeof ping - 1)) {
      pollfd p{fd, POLLIN, 0};
      char buf[64] = {};
      if (::poll(&p, 1, 1000) == 1 && ::read(fd, buf, sizeof buf - 1) > 0) {
        // A server that wants a password is up as well; LOADING or anything else is not.
        ok = std::strncmp(buf, "+PONG", 5) == 0 || std::strncmp(buf, "-NOAUTH", 7) == 0;
      }
    }
  }
  ::close(fd);
  return ok;
}

}  // namespace

const server_programs& default_programs() {
  static const server_programs programs = [] {
    const auto family_named = [](const std::string& family) {
      return server_programs{family, family + "-server", family + "-sentinel", family + "-cli"};
    };
    const char* chosen = std::getenv("DLOCK_TEST_SERVER");
    const std::string name = chosen ? chosen : "";
    if (name == "redis" || name == "valkey") return family_named(name);
    if (!name.empty()) {
      throw std::invalid_argument("DLOCK_TEST_SERVER must be redis or valkey, not '" + name + "'");
    }
    if (!server_available("redis-server") && server_available("valkey-server"))
      return family_named("valkey");
    return family_named("redis");
  }();
  return programs;
}

bool server_available(const std::string& executable) {
  if (executable.find('/') != std::string::npos) return ::access(executable.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const auto end = dirs.find(':', start);
    const std::string dir = dirs.substr(start, end == std::string::npos ? end : end - start);
    if (!dir.empty() && ::access((dir + "/" + executable).c_str(), X_OK) == 0) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

redis_server::redis_server(server_options options) : options_(std::move(options)) {
  if (!server_available(options_.executable)) {
    throw server_error(options_.executable +
                       " not found; install it (Debian: apt-get install redis-server, or"
                       " valkey-server)");
  }
  char tmpl[] = "/tmp/dlock-redis-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    throw server_error(std::string("cannot create a temporary directory: ") + std::strerror(errno));
  }
  dir_ = tmpl;
  // Another process may take the port between our probe and the server's bind: try a few.
  for (int attempt = 0;; ++attempt) {
    port_ = pick_free_port(options_.max_port, options_.bus_port_offset);
    if (!options_.tls_cert_file.empty()) tls_port_ = pick_free_port();
    try {
      write_config();
      start();
      return;
    } catch (const server_error&) {
      if (attempt == 4) {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
        throw;
      }
    }
  }
}

redis_server::~redis_server() {
  stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string redis_server::url() const {
  return "redis://127.0.0.1:" + std::to_string(port_);
}

void redis_server::write_config() {
  if (!options_.config) return;
  std::ofstream out(config_file(), std::ios::trunc);
  out << options_.config(port_);
  if (!out.flush()) throw server_error("cannot write " + config_file());
}

void redis_server::launch() {
  std::vector<std::string> args = {options_.executable};
  // Redis takes a configuration file only as its first argument.
  if (options_.config) args.push_back(config_file());
  args.insert(args.end(),
              {"--port", std::to_string(port_), "--bind", "127.0.0.1", "--dir", dir_, "--save", "",
               "--appendonly", "no", "--daemonize", "no", "--logfile", dir_ + "/redis.log",
               "--unixsocket", unix_socket(), "--unixsocketperm", "700"});
  if (!options_.tls_cert_file.empty()) {
    args.insert(args.end(),
                {"--tls-port", std::to_string(tls_port_), "--tls-cert-file", options_.tls_cert_file,
                 "--tls-key-file", options_.tls_key_file, "--tls-ca-cert-file",
                 options_.tls_ca_file, "--tls-auth-clients", "optional"});
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  try {
    process_.emplace(args, spawn_options{.quiet = true});
  } catch (const std::exception& e) {
    throw server_error(e.what());
  }
}

void redis_server::start() {
  if (running()) return;
  std::error_code ignored;
  std::filesystem::remove(unix_socket(), ignored);
  launch();
  if (!wait_ready(std::chrono::steady_clock::now() + options_.start_timeout)) {
    process_.reset();
    const std::string tail = log_tail();
    stop();
    throw server_error(options_.executable + " did not start on port " + std::to_string(port_) +
                       ":\n" + tail);
  }
}

void redis_server::wipe_data() {
  if (running()) throw server_error("wipe_data: the server is running");
  std::error_code ignored;
  // Redis 7 keeps its AOF in a directory of base and incremental files; older ones in one file.
  for (const char* name : {"appendonlydir", "appendonly.aof", "dump.rdb"}) {
    std::filesystem::remove_all(std::filesystem::path(dir_) / name, ignored);
  }
}

bool redis_server::wait_ready(std::chrono::steady_clock::time_point deadline) {
  auto pause = 1ms;
  while (std::chrono::steady_clock::now() < deadline) {
    if (process_->try_wait()) return false;  // it exited: the log says why
    if (answers_ping(unix_socket())) return true;
    // Readiness is a condition only the server can signal; back off gently while it starts.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, 20ms);
  }
  return false;
}

void redis_server::stop() noexcept {
  if (!running()) return;
  process_->signal(SIGTERM);
  process_->signal(SIGCONT);  // a paused server must wake up to act on SIGTERM
  process_->wait(5000ms);     // SIGKILL if it has not exited by then
  process_.reset();
  paused_ = false;
}

void redis_server::kill() noexcept {
  if (!running()) return;
  process_->signal(SIGKILL);
  process_->wait();
  process_.reset();
  paused_ = false;
}

void redis_server::pause() {
  if (!running()) return;
  process_->signal(SIGSTOP);
  paused_ = true;
}

void redis_server::resume() {
  if (running()) process_->signal(SIGCONT);
  paused_ = false;
}

std::string redis_server::log_tail(std::size_t lines) const {
  std::ifstream in(dir_ + "/redis.log");
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(line);
    if (tail.size() > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail)
    out += l + "\n";
  return out;
}

}  // namespace dlock::embedded
