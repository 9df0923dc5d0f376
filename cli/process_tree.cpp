#include "process_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

namespace dlock::cli {
namespace {

// /proc/PID/stat, or "" if the process is gone. Read with read(2), not a stream: a process that
// exits between the open and the read fails the read with ESRCH, which libstdc++'s filebuf turns
// into an exception whatever the stream's exception mask; while a tree is being killed that is
// the common case, and the exception ended `dlock run` (exit 70) with descendants left alive.
std::string stat_of(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string stat;
  char chunk[512];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) stat.clear();
    if (n <= 0) break;
    stat.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return stat;
}

// The parent of `pid` from /proc/PID/stat, or -1 if it is gone. The command name (field 2) is in
// parentheses and may itself contain spaces and parentheses, so fields are counted after the last
// ')'.
pid_t parent_of(pid_t pid) {
  const std::string stat = stat_of(pid);
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return -1;
  // ") S PPID ..."
  const auto ppid_at = stat.find(' ', close + 2);
  if (ppid_at == std::string::npos) return -1;
  try {
    return static_cast<pid_t>(std::stol(stat.substr(ppid_at + 1)));
  } catch (const std::exception&) {
    return -1;
  }
}

bool is_descendant(pid_t pid, const std::unordered_set<pid_t>& tree) {
  const pid_t parent = parent_of(pid);
  return parent == ::getpid() || tree.count(parent) > 0;
}

}  // namespace

void become_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    throw std::system_error(errno, std::generic_category(), "prctl(PR_SET_CHILD_SUBREAPER)");
  }
}

std::vector<pid_t> descendants() {
  std::unordered_map<pid_t, std::vector<pid_t>> children;
  if (DIR* proc = ::opendir("/proc")) {
    while (const dirent* entry = ::readdir(proc)) {
      char* end = nullptr;
      const long pid = std::strtol(entry->d_name, &end, 10);
      if (pid <= 0 || *end != '\0') continue;
      const pid_t parent = parent_of(static_cast<pid_t>(pid));
      if (parent > 0) children[parent].push_back(static_cast<pid_t>(pid));
    }
    ::closedir(proc);
  }
  std::vector<pid_t> found;
  std::vector<pid_t> next = {::getpid()};
  while (!next.empty()) {
    const pid_t p = next.back();
    next.pop_back();
    for (pid_t c : children[p]) {
      found.push_back(c);
      next.push_back(c);
    }
  }
  return found;
}

std::size_t signal_descendants(int sig) {
  const auto tree_list = descendants();
  const std::unordered_set<pid_t> tree(tree_list.begin(), tree_list.end());
  std::size_t signalled = 0;
  for (pid_t pid : tree_list) {
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) {
      if (errno == ENOSYS && ::kill(pid, sig) == 0) ++signalled;  // kernels before 5.3
      continue;                                                   // gone meanwhile
    }
    // The pidfd pins this very process: if it still descends from us now, it is the one we saw.
    if (is_descendant(pid, tree) && ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0) {
      ++signalled;
    }
    ::close(pidfd);
  }
  return signalled;
}

bool reap_children(pid_t watched, const std::function<void()>& reap_watched) {
  for (;;) {
    siginfo_t info{};
    // WNOWAIT: look first, so that the watched child is reaped by its owner, not here.
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      return errno == ECHILD;
    }
    if (info.si_pid == 0) return false;  // children remain, none has exited
    if (info.si_pid == watched) {
      reap_watched();
      watched = -1;  // reaped now; never handed to its owner twice
    } else {
      int status = 0;
      ::waitpid(info.si_pid, &status, 0);
    }
  }
}

}  // namespace dlock::cli
