// Drawing `dlock watch`: tables, the terminal, keys and signals.
#include "watch_screen.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <stdexcept>

#include "display.hpp"
#include "dlock/redis/client.hpp"

namespace dlock::cli {
namespace {

bool continuation(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

// Display width as code points: escaped() leaves no control characters, and wide characters
// are rare enough in lock names to be counted as one.
std::size_t width_of(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return !continuation(static_cast<unsigned char>(c)); }));
}

std::string padded(const std::string& cell, std::size_t width, bool right) {
  const auto w = width_of(cell);
  if (w >= width) return cell;
  const std::string pad(width - w, ' ');
  return right ? std::string(pad).append(cell) : std::string(cell).append(pad);
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const auto n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the terminal went away: nothing left to draw on
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

int signal_write_fd = -1;
constexpr int watched_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
struct sigaction saved_actions[std::size(watched_signals)];

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const char byte = static_cast<char>(sig);
  [[maybe_unused]] const auto n = ::write(signal_write_fd, &byte, 1);
  errno = saved;
}

}  // namespace

std::string clock_text(wall_time t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm local{};
  ::localtime_r(&secs, &local);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

std::string server_text(const client_options& o, const std::vector<redis_client*>& masters) {
  const auto where = [](const connection_options& c) {
    if (!c.unix_path.empty()) return c.unix_path;
    return std::string(c.host).append(":").append(std::to_string(c.port));
  };
  const auto count = std::to_string(masters.size()).append(" masters");
  if (!o.sentinel.master_name.empty()) {
    auto out = std::string("sentinel ").append(escaped(o.sentinel.master_name));
    if (!masters.empty()) out.append(" at ").append(where(masters.front()->options()));
    return out;
  }
  if (!o.cluster_seeds.empty()) return std::string("cluster, ").append(count);
  if (!o.redlock.masters.empty()) return std::string("redlock, ").append(count);
  return masters.empty() ? std::string("?") : where(masters.front()->options());
}

std::vector<std::string> table_lines(const std::vector<watch_row>& rows) {
  // The holder last, as ps puts the command: it is as long as the command it names, and a narrow
  // terminal cuts it rather than the figures.
  static const char* const headers[] = {"NAME",    "KIND",  "HELD",       "TTL",
                                        "WAITERS", "FENCE", "HANDOFFS/S", "HOLDER"};
  static constexpr bool right[] = {false, false, true, true, true, true, true, false};
  constexpr std::size_t n = std::size(headers);
  std::vector<std::vector<std::string>> table;
  table.emplace_back(std::begin(headers), std::end(headers));
  for (const auto& r : rows)
    table.push_back({r.name, r.kind, r.held, r.ttl, r.waiters, r.fence, r.handoffs, r.holder});
  std::vector<std::size_t> widths(n, 0);
  for (const auto& line : table) {
    for (std::size_t i = 0; i < n; ++i)
      widths[i] = std::max(widths[i], width_of(line[i]));
  }
  std::vector<std::string> out;
  for (const auto& line : table) {
    std::string text;
    for (std::size_t i = 0; i < n; ++i) {
      if (i > 0) text.append("  ");
      text.append(padded(line[i], widths[i], right[i]));
    }
    out.push_back(std::move(text));
  }
  return out;
}

std::string fit(std::string_view line, std::size_t columns) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (continuation(static_cast<unsigned char>(line[i]))) continue;
    if (seen++ == columns) return std::string(line.substr(0, i));
  }
  return std::string(line);
}

signal_pipe::signal_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2 failed");
  read_fd_ = fds[0];
  signal_write_fd = fds[1];
  for (std::size_t i = 0; i < std::size(watched_signals); ++i) {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(watched_signals[i], &sa, &saved_actions[i]);
  }
}

signal_pipe::~signal_pipe() {
  for (std::size_t i = 0; i < std::size(watched_signals); ++i)
    ::sigaction(watched_signals[i], &saved_actions[i], nullptr);
  ::close(signal_write_fd);
  ::close(read_fd_);
  signal_write_fd = -1;
}

std::vector<int> signal_pipe::take() {
  std::vector<int> out;
  char buf[64];
  for (;;) {
    const auto n = ::read(read_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    for (ssize_t i = 0; i < n; ++i)
      out.push_back(static_cast<unsigned char>(buf[i]));
  }
}

inbox::inbox() {
  if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2 failed");
}

inbox::~inbox() {
  ::close(fds_[0]);
  ::close(fds_[1]);
}

void inbox::push(std::string_view channel, std::string_view message) {
  {
    std::lock_guard lock(mutex_);
    items_.emplace_back(std::string(channel), std::string(message));
  }
  const char byte = 1;  // a full pipe already wakes the loop
  [[maybe_unused]] const auto n = ::write(fds_[1], &byte, 1);
}

std::vector<std::pair<std::string, std::string>> inbox::take() {
  char buf[256];
  while (::read(fds_[0], buf, sizeof buf) > 0) {
  }
  std::lock_guard lock(mutex_);
  return std::exchange(items_, {});
}

terminal::terminal() {
  if (::tcgetattr(STDIN_FILENO, &saved_) == 0) {
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_iflag &= ~static_cast<tcflag_t>(IXON | ICRNL);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    raw_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  write_all(STDOUT_FILENO, "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J");
  resize();
}

terminal::~terminal() {
  write_all(STDOUT_FILENO, "\x1b[0m\x1b[?25h\x1b[?1049l");
  if (raw_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
}

void terminal::resize() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
    rows_ = ws.ws_row;
    columns_ = ws.ws_col;
  }
  last_frame_.clear();
}

void terminal::draw(const std::vector<std::string>& lines) {
  std::string frame = "\x1b[H";
  const auto count = std::min(lines.size(), rows_);
  for (std::size_t i = 0; i < count; ++i) {
    frame.append(fit(lines[i], columns_)).append("\x1b[K");
    if (i + 1 < count) frame.append("\r\n");
  }
  frame.append("\x1b[J");
  if (frame == last_frame_) return;
  write_all(STDOUT_FILENO, frame);
  last_frame_ = std::move(frame);
}

std::vector<key_action> key_reader::feed(std::string_view bytes) {
  std::vector<key_action> actions;
  const auto act = [&](key_action a) { actions.push_back(a); };
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == 0x1b && i + 1 < bytes.size() && (bytes[i + 1] == '[' || bytes[i + 1] == 'O')) {
      // An arrow or function key: skip its sequence up to the final byte.
      for (i += 2; i < bytes.size() && !(bytes[i] >= 0x40 && bytes[i] <= 0x7e); ++i) {
      }
      continue;
    }
    if (!editing_) {
      if (c == 'q' || c == 'Q' || c == 0x03) {
        act(key_action::quit);
        return actions;
      }
      if (c == 's' || c == 'S') act(key_action::sort);
      if (c == '/') {
        editing_ = true;
        typed_ = filter_;
        act(key_action::redraw);
      }
      continue;
    }
    if (c == '\r' || c == '\n') {
      editing_ = false;
      filter_ = typed_;
      act(key_action::filter_changed);
    } else if (c == 0x1b) {
      editing_ = false;
      typed_.clear();
      act(key_action::redraw);
    } else if (c == 0x7f || c == 0x08) {
      while (!typed_.empty() && continuation(static_cast<unsigned char>(typed_.back())))
        typed_.pop_back();
      if (!typed_.empty()) typed_.pop_back();
      act(key_action::redraw);
    } else if (c >= 0x20) {
      typed_.push_back(static_cast<char>(c));
      act(key_action::redraw);
    }
  }
  return actions;
}

}  // namespace dlock::cli
