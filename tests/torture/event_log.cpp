#include "event_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace dlock::torture {

event_writer::event_writer(const std::string& path)
    : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "open " + path);
}

event_writer::~event_writer() {
  if (fd_ >= 0) ::close(fd_);
}

void event_writer::write(std::span<const std::string_view> fields) const noexcept {
  // Small enough for the stack in practice; a std::string would allocate in on_lost callbacks
  // just the same, and lines are short.
  char buffer[1024];
  std::size_t n = 0;
  for (auto f : fields) {
    if (n > 0 && n < sizeof buffer) buffer[n++] = ' ';
    if (f.empty()) f = "-";  // an empty field would vanish between two spaces
    for (const char c : f) {
      if (n + 1 >= sizeof buffer) break;
      // A space or newline inside a field would break the line's shape.
      buffer[n++] = (c == ' ' || c == '\n') ? '_' : c;
    }
  }
  buffer[n++] = '\n';
  for (std::size_t done = 0; done < n;) {
    const auto w = ::write(fd_, buffer + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    done += static_cast<std::size_t>(w);
  }
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= line.size()) {
    const auto end = line.find(' ', start);
    if (end == std::string_view::npos) {
      if (start < line.size()) out.push_back(line.substr(start));
      break;
    }
    if (end > start) out.push_back(line.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string last_line(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  std::string tail;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    const off_t size = st.st_size;
    const off_t from = size > 1024 ? size - 1024 : 0;
    tail.resize(static_cast<std::size_t>(size - from));
    const auto n = ::pread(fd, tail.data(), tail.size(), from);
    tail.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  }
  ::close(fd);
  // Only whole lines count: a line being written has no '\n' yet.
  const auto end = tail.rfind('\n');
  if (end == std::string::npos) return {};
  const auto start = tail.rfind('\n', end == 0 ? 0 : end - 1);
  if (start == std::string::npos || start >= end) return tail.substr(0, end);
  return tail.substr(start + 1, end - start - 1);
}

}  // namespace dlock::torture
