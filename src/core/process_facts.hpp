// What a process can say of itself to an operator: its host, pid, user and program name, for the
// names it gives its connections and the holder records of its grants.
#pragma once

#include <cstdint>
#include <string>

namespace dlock::detail {

struct process_facts {
  std::string host;  ///< gethostname()
  std::int64_t pid = 0;
  std::string user;     ///< the effective user's name, or its uid in digits
  std::string program;  ///< the program's name without its directory
};

/// gethostname(), or "?".
std::string host_name();

/// This process's facts, read when asked (a fork reads its own pid). A fact the system will not
/// tell is "?". Never throws except std::bad_alloc.
process_facts this_process();

}  // namespace dlock::detail
