#include "embedded/resp_client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "embedded/redis_server.hpp"

namespace dlock::embedded {
namespace {

using clock = std::chrono::steady_clock;

int millis_left(clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  return static_cast<int>(std::max<std::int64_t>(left.count(), 0));
}

// False on timeout; EINTR restarts with what is left.
bool wait_for(int fd, short events, clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, millis_left(deadline));
    if (ready < 0 && errno == EINTR) continue;
    return ready > 0;
  }
}

}  // namespace

std::string resp_value::to_string() const {
  switch (type) {
    case kind::simple:
      return text;
    case kind::error:
      return "-" + text;
    case kind::integer:
      return std::to_string(integer);
    case kind::bulk:
      return '"' + text + '"';
    case kind::nil:
      return "(nil)";
    case kind::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < elements.size(); ++i) {
        if (i) out += ", ";
        out += elements[i].to_string();
      }
      return out + "]";
    }
  }
  return {};
}

resp_client::resp_client(std::uint16_t port, const std::string& password,
                         std::chrono::milliseconds timeout)
    : port_(port), timeout_(timeout) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) throw server_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int e = 0;
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    e = errno;
    if (e == EINPROGRESS) {
      socklen_t len = sizeof e;
      e = wait_for(fd_, POLLOUT, clock::now() + timeout_) ? 0 : ETIMEDOUT;
      if (e == 0) ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &e, &len);
    }
  }
  if (e != 0) {
    ::close(fd_);
    fd_ = -1;
    throw server_error("cannot connect to 127.0.0.1:" + std::to_string(port) + ": " +
                       std::strerror(e));
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!password.empty()) checked({"AUTH", password});
}

resp_client::~resp_client() {
  if (fd_ >= 0) ::close(fd_);
}

resp_value resp_client::operator()(const std::vector<std::string>& args) {
  if (fd_ < 0) throw server_error("connection to port " + std::to_string(port_) + " is broken");
  std::string out;
  out.append(1, '*').append(std::to_string(args.size())).append("\r\n");
  for (const auto& a : args) {
    out.append(1, '$').append(std::to_string(a.size())).append("\r\n").append(a).append("\r\n");
  }
  const auto deadline = clock::now() + timeout_;
  try {
    send_all(out, deadline);
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
  return read();
}

resp_value resp_client::read() {
  if (fd_ < 0) throw server_error("connection to port " + std::to_string(port_) + " is broken");
  try {
    auto value = read_value(clock::now() + timeout_, 0);
    buffer_.erase(0, pos_);
    pos_ = 0;
    return value;
  } catch (...) {
    // A half-read reply leaves the stream out of step: nothing more may be read from it.
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

resp_value resp_client::checked(const std::vector<std::string>& args) {
  auto value = (*this)(args);
  if (value.is_error()) {
    throw server_error((args.empty() ? std::string() : args.front()) + " on port " +
                       std::to_string(port_) + " failed: " + value.text);
  }
  return value;
}

void resp_client::send_all(const std::string& data, clock::time_point deadline) {
  for (std::size_t sent = 0; sent < data.size();) {
    const auto n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd_, POLLOUT, deadline)) {
        throw server_error("timed out writing to port " + std::to_string(port_));
      }
    } else {
      throw server_error("cannot write to port " + std::to_string(port_) + ": " +
                         std::strerror(errno));
    }
  }
}

char resp_client::read_byte(clock::time_point deadline) {
  while (pos_ >= buffer_.size()) {
    char chunk[16384];
    const auto n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n > 0) {
      buffer_.append(chunk, static_cast<std::size_t>(n));
    } else if (n == 0) {
      throw server_error("port " + std::to_string(port_) + " closed the connection");
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd_, POLLIN, deadline)) {
        throw server_error("no reply from port " + std::to_string(port_) + " within " +
                           std::to_string(timeout_.count()) + " ms");
      }
    } else {
      throw server_error("cannot read from port " + std::to_string(port_) + ": " +
                         std::strerror(errno));
    }
  }
  return buffer_[pos_++];
}

std::string resp_client::read_line(clock::time_point deadline) {
  std::string line;
  for (;;) {
    const char c = read_byte(deadline);
    if (c == '\n' && !line.empty() && line.back() == '\r') {
      line.pop_back();
      return line;
    }
    line += c;
  }
}

resp_value resp_client::read_value(clock::time_point deadline, int depth) {
  if (depth > 32) throw server_error("reply nested too deeply");
  const char type = read_byte(deadline);
  const std::string line = read_line(deadline);
  resp_value v;
  auto number = [&] {
    try {
      return std::stoll(line);
    } catch (const std::exception&) {
      throw server_error("malformed reply from port " + std::to_string(port_) + ": " + line);
    }
  };
  switch (type) {
    case '+':
      v.type = resp_value::kind::simple;
      v.text = line;
      return v;
    case '-':
      v.type = resp_value::kind::error;
      v.text = line;
      return v;
    case ':':
      v.type = resp_value::kind::integer;
      v.integer = number();
      return v;
    case '$': {
      const auto size = number();
      if (size < 0) return v;
      v.type = resp_value::kind::bulk;
      for (long long i = 0; i < size; ++i)
        v.text += read_byte(deadline);
      if (read_byte(deadline) != '\r' || read_byte(deadline) != '\n') {
        throw server_error("malformed bulk string from port " + std::to_string(port_));
      }
      return v;
    }
    case '*': {
      const auto size = number();
      if (size < 0) return v;
      v.type = resp_value::kind::array;
      for (long long i = 0; i < size; ++i)
        v.elements.push_back(read_value(deadline, depth + 1));
      return v;
    }
    default:
      throw server_error("unexpected reply type '" + std::string(1, type) + "' from port " +
                         std::to_string(port_));
  }
}

resp_value redis_command(std::uint16_t port, const std::vector<std::string>& args,
                         const std::string& password) {
  resp_client client(port, password);
  return client(args);
}

std::string info_field(const std::string& info, const std::string& field) {
  const std::string key = field + ":";
  std::size_t at = 0;
  while ((at = info.find(key, at)) != std::string::npos) {
    if (at == 0 || info[at - 1] == '\n') {
      const auto end = info.find_first_of("\r\n", at);
      return info.substr(at + key.size(),
                         end == std::string::npos ? std::string::npos : end - at - key.size());
    }
    at += key.size();
  }
  return {};
}

}  // namespace dlock::embedded
