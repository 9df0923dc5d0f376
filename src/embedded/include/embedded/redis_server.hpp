// A private redis-server process: started on a free loopback port in a fresh temporary directory,
// stopped by its PID. Used by the test fixture and by the commands that bring their own server
// (`dlock demo`, `bench`, `market`). Never shared with anything else, never left running: the
// destructor stops it, and the child is killed by the kernel if this process dies first
// (PR_SET_PDEATHSIG), so a crashed or killed test cannot leak a server.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "embedded/process.hpp"

namespace dlock::embedded {

/// The programs of one server family: Redis or Valkey, which take the same configuration and
/// speak the same protocol.
struct server_programs {
  std::string family;    ///< "redis" or "valkey"
  std::string server;    ///< redis-server / valkey-server
  std::string sentinel;  ///< redis-sentinel / valkey-sentinel
  std::string cli;       ///< redis-cli / valkey-cli (creates clusters)
};

/// The family every embedded server, sentinel and cluster runs unless told otherwise.
/// `DLOCK_TEST_SERVER=redis` or `=valkey` chooses; unset or empty, Redis where redis-server is on
/// PATH, else Valkey where valkey-server is, else Redis (whose absence start() then reports).
/// Read once. Throws `std::invalid_argument` for any other value of the variable.
const server_programs& default_programs();

struct server_options {
  /// Program to run; found on PATH when it has no slash.
  std::string executable = default_programs().server;
  /// Extra configuration, passed as command-line directives (e.g. {"--requirepass", "pw"}).
  std::vector<std::string> extra_args;
  /// Also listen for TLS on a second free port with these PEM files.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_ca_file;
  /// How long start() waits for the server to answer PING.
  std::chrono::milliseconds start_timeout{15000};
  /// If set, the text of a configuration file, given the port chosen for the server: written to
  /// `redis.conf` in the server's directory before the first start and passed ahead of the
  /// directives. The server may rewrite it (a sentinel keeps its state there).
  std::function<std::string(std::uint16_t port)> config;
  /// The highest port the server may listen on.
  std::uint16_t max_port = 65535;
  /// If non-zero, `port + bus_port_offset` must be free as well (a cluster node's bus port).
  std::uint16_t bus_port_offset = 0;
};

/// Thrown when redis-server is missing or fails to start; the message includes the tail of its
/// log.
class server_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// True if `executable` (default: the default family's server) can be found on PATH.
bool server_available(const std::string& executable = default_programs().server);

class redis_server {
 public:
  /// Creates the temporary directory and starts the server. Throws `server_error`.
  explicit redis_server(server_options options = {});
  /// Stops the server (if running) and removes the directory. Never throws.
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  /// Starts the server again after stop() or kill(), on the same ports and directory. The
  /// dataset is empty unless `extra_args` turned persistence on (e.g. `--appendonly yes`): then
  /// it loads what the directory holds, and start() returns once loading is done. Throws
  /// `server_error`.
  void start();
  /// Deletes the dataset files in the directory (AOF and RDB), so that a server with persistence
  /// comes back empty from the next start(): a crash that lost the disk. Only while stopped;
  /// throws `server_error` if the server is running.
  void wipe_data();
  /// SIGTERM, then SIGKILL if it has not exited within 5 s; reaps it. No-op if not running.
  void stop() noexcept;
  /// SIGKILL, reaped at once: a crash.
  void kill() noexcept;
  /// SIGSTOP / SIGCONT: the server stops answering without closing connections.
  void pause();
  void resume();

  bool running() const noexcept { return process_ && process_->running(); }
  /// Running and not paused: it can answer.
  bool answering() const noexcept { return running() && !paused_; }
  pid_t pid() const noexcept { return running() ? process_->pid() : -1; }
  std::uint16_t port() const noexcept { return port_; }
  std::uint16_t tls_port() const noexcept { return tls_port_; }
  const std::string& dir() const noexcept { return dir_; }
  std::string unix_socket() const { return dir_ + "/redis.sock"; }
  /// The configuration file written from `server_options::config`; empty if there is none.
  std::string config_file() const { return options_.config ? dir_ + "/redis.conf" : std::string(); }
  /// redis://127.0.0.1:PORT
  std::string url() const;
  /// The last lines of the server's log, for failure messages.
  std::string log_tail(std::size_t lines = 20) const;

 private:
  void write_config();
  void launch();
  bool wait_ready(std::chrono::steady_clock::time_point deadline);

  server_options options_;
  std::string dir_;
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  std::optional<child_process> process_;
  bool paused_ = false;
};

}  // namespace dlock::embedded
