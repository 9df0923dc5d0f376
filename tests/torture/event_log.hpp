// The torture harness's event logs: what workers and the nemesis write, and what the checker
// reads. One event per line, fields separated by single spaces, the event's letter first. Every
// time is CLOCK_MONOTONIC in nanoseconds (steady_clock): all processes run on one machine, so
// times compare across processes.
//
// Worker events (one log per worker process, w<ID>.log):
//   S worker pid t                                         the worker started
//   G worker grant name fence t_call t_grant kind          granted; kind: reentrant, simple,
//        fair, read, write, semaphore, leased-semaphore, multi (one G line per name of a
//        multi-lock, each with its own grant number)
//   N worker name t_call t_end                             not granted within the wait
//   M worker name holds t                                  a multi-lock's wait ended without
//        the lock, yet the name was left held by its owner (holds > 0)
//   O worker grant name fence kind seq accepted a b t_send t_reply
//        a resource op, kind r (read) or w (write); seq is the resource's op sequence number,
//        or - for an op that never reached it (held writes: refused, the lock no longer held);
//        read: a = the value read, b = the highest fence the resource had seen (- when held);
//        write: a = the value the grant had read (it writes a + 1), b = the value it replaced
//   V worker grant t valid name kind                       lease::valid() before the write
//   L worker grant t reason                                on_lost ran (expired | not_held)
//   R worker grant t_start t_end outcome valid_until       release (released | not_held |
//                                                          unconfirmed); the lease's
//                                                          valid_until() just before it
//   E worker grant t where code                            an exception (grant 0: outside one)
//   T worker t grants attempts born_dead lost release_failures   client_stats at a clean exit
//   c worker name op t_call                                a latch op is about to be sent (op:
//                                                          set, down, wait)
//   C worker name op t_call t_reply result                 it returned: set 1 (armed) or 0
//                                                          (it existed), down the count left,
//                                                          wait 1 (reached) or 0; err: it threw
// Nemesis events (nemesis.log):
//   F kind t_start t_end detail...                          one fault; for kill and stop the
//                                                          detail starts with the worker id
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::torture {

/// CLOCK_MONOTONIC now, in nanoseconds.
inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// An append-only log file. Each line is one write(2) on an O_APPEND descriptor, so lines from
/// several threads never interleave and a SIGKILL loses nothing already written.
class event_writer {
 public:
  /// Opens (creating) `path`. Throws std::system_error.
  explicit event_writer(const std::string& path);
  ~event_writer();
  event_writer(const event_writer&) = delete;
  event_writer& operator=(const event_writer&) = delete;

  /// Writes `fields` joined by spaces, plus '\n'; an empty field is written as "-", spaces and
  /// newlines inside a field as '_'. Never throws (a full disk loses the line).
  void write(std::span<const std::string_view> fields) const noexcept;
  void write(std::initializer_list<std::string_view> fields) const noexcept {
    write(std::span<const std::string_view>(fields.begin(), fields.size()));
  }

 private:
  int fd_ = -1;
};

/// A line split at spaces.
std::vector<std::string_view> split_fields(std::string_view line);

/// The last complete line of `path` (empty if none), read without loading the whole file: the
/// nemesis uses it to see what a worker is doing right now.
std::string last_line(const std::string& path);

}  // namespace dlock::torture
