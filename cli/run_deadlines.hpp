// The moments a supervision must act at without an event to wake it: SIGKILL once --grace has
// passed since the SIGTERM, --max-hold and the end of --min-hold, both counted from the grant.
// The main loop polls with timeout() and then asks which of them is due.
#pragma once

#include <chrono>
#include <optional>

namespace dlock::cli {

class hold_deadlines {
 public:
  using steady = std::chrono::steady_clock;

  hold_deadlines(std::optional<std::chrono::milliseconds> min_hold,
                 std::optional<std::chrono::milliseconds> max_hold)
      : min_hold_(min_hold), max_hold_(max_hold) {}

  /// The grant arrived at `at`: --min-hold and --max-hold count from then.
  void granted(steady::time_point at);
  /// SIGTERM went to the tree at `now`; SIGKILL is due after `grace`. Only the first call counts:
  /// a lost lease while --max-hold already stops the command does not extend the grace.
  void stopping(steady::time_point now, steady::duration grace);
  bool stopping() const { return kill_at_.has_value(); }
  /// Whether SIGKILL is due now; if so, the next one is due shortly after (a process may have
  /// forked just before it was killed).
  bool kill_due(steady::time_point now);
  /// Whether --max-hold has passed with nothing stopping the tree yet.
  bool max_hold_due(steady::time_point now) const;
  /// Whether --min-hold has passed since the grant (at once without --min-hold).
  bool min_hold_over(steady::time_point now) const;
  /// The poll timeout in milliseconds until the next deadline that matters, -1 for none: while
  /// the tree runs, SIGKILL or --max-hold; once it has exited, the end of --min-hold.
  int timeout(steady::time_point now, bool tree_gone) const;

 private:
  std::optional<std::chrono::milliseconds> min_hold_, max_hold_;
  std::optional<steady::time_point> granted_at_, kill_at_;
};

}  // namespace dlock::cli
