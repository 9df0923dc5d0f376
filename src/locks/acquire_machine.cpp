#include "locks/acquire_machine.hpp"

#include <algorithm>

#include "dlock/error.hpp"

namespace dlock::detail {

steady::time_point saturating_add(steady::time_point now, std::chrono::milliseconds d) {
  const auto room =
      std::chrono::duration_cast<std::chrono::milliseconds>(steady::time_point::max() - now);
  return d >= room ? steady::time_point::max() : now + d;
}

acquire_machine::step acquire_machine::attempt(steady::time_point now) {
  ++attempts_;
  // The reply must come by the deadline, and within one command timeout in any case; a
  // single attempt with no time left still gets one command timeout.
  auto until = saturating_add(now, limits_.command_timeout);
  if (!limits_.single_attempt) until = std::min(until, std::max(limits_.deadline, now));
  return {step_kind::attempt, until};
}

acquire_machine::step acquire_machine::wait_until(steady::time_point t) const {
  return {step_kind::wait, std::min(t, limits_.deadline)};
}

acquire_machine::step acquire_machine::start(steady::time_point now) {
  return attempt(now);
}

acquire_machine::step acquire_machine::on_granted() {
  return {step_kind::granted};
}

acquire_machine::step acquire_machine::on_busy(std::int64_t pttl_ms, steady::time_point now) {
  backoff_ = std::chrono::milliseconds(0);
  if (limits_.single_attempt || now >= limits_.deadline) return {step_kind::not_acquired};
  if (pttl_ms == -2) return attempt(now);  // released between the check and the PTTL
  auto sleep = limits_.max_recheck;
  if (pttl_ms >= 0) sleep = std::min(sleep, std::chrono::milliseconds(pttl_ms));
  return wait_until(saturating_add(now, sleep));
}

acquire_machine::step acquire_machine::on_wake(steady::time_point now) {
  if (now >= limits_.deadline) return {step_kind::not_acquired};
  return attempt(now);
}

acquire_machine::step acquire_machine::on_error(std::error_code ec, steady::time_point now) {
  const bool transient =
      ec == errc::timeout || ec == errc::connection_lost || ec == errc::server_busy;
  if (!transient || limits_.single_attempt) return {step_kind::failed, {}, ec};
  if (now >= limits_.deadline) return {step_kind::not_acquired};
  backoff_ =
      std::min(backoff_.count() == 0 ? limits_.retry_backoff : backoff_ * 2, limits_.max_recheck);
  return wait_until(saturating_add(now, backoff_));
}

}  // namespace dlock::detail
