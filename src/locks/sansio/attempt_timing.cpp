#include "locks/sansio/attempt_timing.hpp"

#include <algorithm>
#include <random>

#include "dlock/error.hpp"

namespace dlock::detail {

steady::time_point saturating_add(steady::time_point now, std::chrono::milliseconds d) {
  const auto room =
      std::chrono::duration_cast<std::chrono::milliseconds>(steady::time_point::max() - now);
  return d >= room ? steady::time_point::max() : now + d;
}

attempt_timing::attempt_timing(acquire_limits limits, std::function<double()> uniform)
    : limits_(limits), uniform_(std::move(uniform)) {
  if (!uniform_ && limits_.jitter_round_trips > 0) {
    uniform_ = [] {
      thread_local std::minstd_rand engine{std::random_device{}()};
      return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
    };
  }
}

attempt_timing::step attempt_timing::attempt(steady::time_point now) {
  ++attempts_;
  // The reply must come by the deadline, and within one command timeout in any case; a
  // single attempt with no time left still gets one command timeout.
  auto until = saturating_add(now, limits_.command_timeout);
  if (!limits_.single_attempt) until = std::min(until, std::max(limits_.deadline, now));
  return {step_kind::attempt, until};
}

attempt_timing::step attempt_timing::wait_until(steady::time_point t) const {
  return {step_kind::wait, std::min(t, limits_.deadline)};
}

attempt_timing::step attempt_timing::start(steady::time_point now) {
  return attempt(now);
}

attempt_timing::step attempt_timing::on_granted() {
  return {step_kind::granted};
}

attempt_timing::step attempt_timing::on_busy(std::int64_t pttl_ms, steady::time_point now) {
  backoff_ = std::chrono::milliseconds(0);
  if (limits_.single_attempt || now >= limits_.deadline) return {step_kind::not_acquired};
  steady::duration jitter{0};
  if (limits_.jitter_round_trips > 0) {
    jitter = std::chrono::duration_cast<steady::duration>(round_trip_ * limits_.jitter_round_trips *
                                                          uniform_());
    jitter_until_ = now + jitter;
  }
  // Released between the check and the PTTL: free now.
  if (pttl_ms == -2 && jitter == steady::duration::zero()) return attempt(now);
  auto sleep = limits_.max_recheck;
  if (pttl_ms >= 0) sleep = std::min(sleep, std::chrono::milliseconds(pttl_ms));
  if (pttl_ms == -2) sleep = std::chrono::milliseconds(0);
  const auto until = saturating_add(now, sleep);
  return wait_until(until == steady::time_point::max() ? until : until + jitter);
}

attempt_timing::step attempt_timing::on_wake(steady::time_point now) {
  if (now >= limits_.deadline) return {step_kind::not_acquired};
  if (now < jitter_until_) return wait_until(jitter_until_);
  return attempt(now);
}

attempt_timing::step attempt_timing::on_error(std::error_code ec, steady::time_point now) {
  const bool transient =
      ec == errc::timeout || ec == errc::connection_lost || ec == errc::server_busy;
  if (!transient || limits_.single_attempt) return {step_kind::failed, {}, ec};
  if (now >= limits_.deadline) return {step_kind::not_acquired};
  backoff_ =
      std::min(backoff_.count() == 0 ? limits_.retry_backoff : backoff_ * 2, limits_.max_recheck);
  return wait_until(saturating_add(now, backoff_));
}

}  // namespace dlock::detail
