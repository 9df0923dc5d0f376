// hold_deadlines, for run_supervisor.cpp (run_deadlines.hpp says what each deadline is).
#include "run_deadlines.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>

namespace dlock::cli {

using namespace std::chrono_literals;

void hold_deadlines::granted(steady::time_point at) {
  granted_at_ = at;
}

void hold_deadlines::stopping(steady::time_point now, steady::duration grace) {
  if (!kill_at_) kill_at_ = now + grace;
}

bool hold_deadlines::kill_due(steady::time_point now) {
  if (!kill_at_ || now < *kill_at_) return false;
  kill_at_ = now + 100ms;
  return true;
}

bool hold_deadlines::max_hold_due(steady::time_point now) const {
  return granted_at_ && max_hold_ && !kill_at_ && now >= *granted_at_ + *max_hold_;
}

bool hold_deadlines::min_hold_over(steady::time_point now) const {
  return !granted_at_ || !min_hold_ || now >= *granted_at_ + *min_hold_;
}

int hold_deadlines::timeout(steady::time_point now, bool tree_gone) const {
  std::optional<steady::time_point> next;
  if (!granted_at_) return -1;  // before the grant, only events wake the loop
  if (tree_gone) {
    if (min_hold_) next = *granted_at_ + *min_hold_;
  } else if (kill_at_) {
    next = kill_at_;
  } else if (max_hold_) {
    next = *granted_at_ + *max_hold_;
  }
  if (!next) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
  return static_cast<int>(std::clamp<std::int64_t>(left, 0, INT_MAX));
}

}  // namespace dlock::cli
