#include "core/process_facts.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <vector>

namespace dlock::detail {
std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "?";
  return buf;
}

namespace {

std::string user_name() {
  const uid_t uid = ::geteuid();
  std::vector<char> buf(4096);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(uid, &entry, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
      found->pw_name != nullptr && found->pw_name[0] != '\0') {
    return found->pw_name;
  }
  return std::to_string(uid);  // a container's user without a passwd entry
}

// argv[0] as the kernel keeps it, which a program may have rewritten to say what it is.
std::string program_name() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string first;
  if (!in || !std::getline(in, first, '\0') || first.empty()) return "?";
  const auto slash = first.find_last_of('/');
  return slash == std::string::npos ? first : first.substr(slash + 1);
}

}  // namespace

process_facts this_process() {
  return {host_name(), static_cast<std::int64_t>(::getpid()), user_name(), program_name()};
}

}  // namespace dlock::detail
