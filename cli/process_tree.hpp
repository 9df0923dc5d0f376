// The processes `dlock run` is responsible for: the command and everything it starts. dlock
// becomes their child subreaper, so a descendant whose parent exits is handed to dlock rather
// than to init; the lock is held until no descendant is left, and all of them can be signalled.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

namespace dlock::cli {

/// Makes this process the reaper of its orphaned descendants (PR_SET_CHILD_SUBREAPER). Throws
/// std::system_error if the kernel refuses.
void become_subreaper();

/// The live descendants of this process (children, their children, ...), read from /proc.
std::vector<pid_t> descendants();

/// Sends `sig` to every descendant, including those that left the command's process group or
/// session. Each is addressed through a pidfd checked to still be a descendant, so a recycled
/// PID is never signalled. Returns how many were signalled.
std::size_t signal_descendants(int sig);

/// Reaps every child that has exited, without waiting. The child `watched` is reaped by
/// `reap_watched` (its own child_process object, which must reap it to learn its status); the
/// others here. Returns true when this process has no child left at all: every descendant has
/// exited and been reaped (orphans are reparented to us, so none can be running elsewhere).
bool reap_children(pid_t watched, const std::function<void()>& reap_watched);

}  // namespace dlock::cli
