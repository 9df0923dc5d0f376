// A deliberately small blocking RESP2 client for the embedded deployments: set-up commands, health
// checks and test assertions against 127.0.0.1 ports. Independent of the dlock library (whose
// client is what the tests exercise), with a deadline on every call so that a stopped or wedged
// server fails a test instead of hanging it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock::embedded {

/// One RESP2 reply.
struct resp_value {
  enum class kind { simple, error, integer, bulk, nil, array };
  kind type = kind::nil;
  /// The simple string, the error message (without '-') or the bulk string.
  std::string text;
  long long integer = 0;
  std::vector<resp_value> elements;

  bool is_error() const noexcept { return type == kind::error; }
  /// The reply as one line, for failure messages.
  std::string to_string() const;
};

class resp_client {
 public:
  /// Connects to 127.0.0.1:`port` and, with a password, sends AUTH. Throws `server_error` if the
  /// connection or the AUTH fails.
  explicit resp_client(std::uint16_t port, const std::string& password = {},
                       std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~resp_client();
  resp_client(const resp_client&) = delete;
  resp_client& operator=(const resp_client&) = delete;

  /// Sends one command and returns its reply; an error reply is returned, not thrown. Throws
  /// `server_error` if the connection fails or no reply comes within the timeout.
  resp_value operator()(const std::vector<std::string>& args);
  /// As operator(), but an error reply throws `server_error` too.
  resp_value checked(const std::vector<std::string>& args);
  /// Reads the next value without sending anything: a message pushed to a subscribed
  /// connection. Throws `server_error` if none comes within the timeout.
  resp_value read();

 private:
  void send_all(const std::string& data, std::chrono::steady_clock::time_point deadline);
  char read_byte(std::chrono::steady_clock::time_point deadline);
  std::string read_line(std::chrono::steady_clock::time_point deadline);
  resp_value read_value(std::chrono::steady_clock::time_point deadline, int depth);

  int fd_ = -1;
  std::uint16_t port_;
  std::chrono::milliseconds timeout_;
  std::string buffer_;
  std::size_t pos_ = 0;
};

/// Opens a connection, sends one command, returns its reply (errors included). Throws
/// `server_error` if the server cannot be reached.
resp_value redis_command(std::uint16_t port, const std::vector<std::string>& args,
                         const std::string& password = {});

/// The value of `field` in an INFO-style "field:value" text, or an empty string.
std::string info_field(const std::string& info, const std::string& field);

}  // namespace dlock::embedded
