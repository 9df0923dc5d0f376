// Drawing `dlock watch` (watch_screen.cpp): the table both modes print, the terminal it is
// drawn on (raw mode, alternate screen, whole frames in one write), the keys, and the signals
// that end or resize it. No curses: a few ANSI sequences every terminal emulator knows.
#pragma once

#include <termios.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/client.hpp"
#include "watch_model.hpp"

namespace dlock::cli {

/// The header's "12:00:01" (local time).
std::string clock_text(wall_time t);
/// The header's server: host:port, "sentinel MASTER at host:port", "cluster, 3 masters", ...
std::string server_text(const client_options& o, const std::vector<redis_client*>& masters);

/// The table's lines: a header row and one line per row, columns padded to their widest cell.
std::vector<std::string> table_lines(const std::vector<watch_row>& rows);

/// Cuts `line` to at most `columns` characters (UTF-8 code points), never inside one.
std::string fit(std::string_view line, std::size_t columns);

/// SIGINT, SIGTERM, SIGHUP and SIGWINCH turned into bytes on a pipe that poll() can watch; the
/// previous dispositions come back when it dies. One at a time.
class signal_pipe {
 public:
  signal_pipe();
  ~signal_pipe();
  signal_pipe(const signal_pipe&) = delete;
  signal_pipe& operator=(const signal_pipe&) = delete;
  int fd() const { return read_fd_; }
  /// The signals that arrived since the last call.
  std::vector<int> take();

 private:
  int read_fd_ = -1;
};

/// Pub/sub messages (channel, message), handed from the clients' I/O threads to the loop, which
/// a byte on a pipe wakes.
class inbox {
 public:
  inbox();
  ~inbox();
  inbox(const inbox&) = delete;
  inbox& operator=(const inbox&) = delete;
  int fd() const { return fds_[0]; }
  void push(std::string_view channel, std::string_view message);
  std::vector<std::pair<std::string, std::string>> take();

 private:
  int fds_[2] = {-1, -1};
  std::mutex mutex_;
  std::vector<std::pair<std::string, std::string>> items_;
};

/// The terminal on stdin/stdout while watch draws on it: raw input (no echo, no line editing;
/// Ctrl-C still signals), the alternate screen and a hidden cursor, all undone when it dies,
/// however watch ends (an exception included).
class terminal {
 public:
  terminal();
  ~terminal();
  terminal(const terminal&) = delete;
  terminal& operator=(const terminal&) = delete;

  /// Re-reads the window size (after SIGWINCH).
  void resize();
  std::size_t rows() const { return rows_; }
  std::size_t columns() const { return columns_; }
  /// Draws `lines` as the whole screen in one write: cursor home, each line cut to the width
  /// and cleared to its end, the rest of the screen cleared. Skips a frame equal to the last.
  void draw(const std::vector<std::string>& lines);
  /// Forgets the last frame, so that the next is written whatever it holds.
  void invalidate() { last_frame_.clear(); }

 private:
  termios saved_{};
  bool raw_ = false;
  std::size_t rows_ = 24, columns_ = 80;
  std::string last_frame_;
};

/// What a key press asks for.
enum class key_action { none, quit, sort, filter_changed, redraw };

/// The keys: `q` quits, `s` cycles the sort, `/` starts typing a glob filter (Enter applies it,
/// Esc cancels, Backspace erases).
class key_reader {
 public:
  /// Handles the bytes read from stdin (several keys may come in one read); returns what they
  /// asked for, in order.
  std::vector<key_action> feed(std::string_view bytes);
  bool editing() const { return editing_; }
  const std::string& typed() const { return typed_; }
  const std::string& filter() const { return filter_; }

 private:
  bool editing_ = false;
  std::string typed_, filter_;
};

}  // namespace dlock::cli
