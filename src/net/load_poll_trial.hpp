// Whether polling under load pays for this client, found out by trying it.
//
// Polling while loaded makes a client whose callers only take and release locks 10-30 % faster,
// and one whose callers have work of their own between round trips (the marketplace's workers,
// each with its own connection for the work) 15-17 % slower: the polling thread takes a vCPU
// they needed (docs/benchmarks.md, Tuning). Nothing the I/O thread can see of its own work told the
// two apart (its waits, its context switches). What does is the outcome: how many replies the
// client completes per second with polling and without. So a loaded client runs a short trial,
// four periods of `period` in the order without, with, with, without (a steady drift in the
// rate then counts alike against both), and polls until the next trial only if the periods with
// polling completed more than `margin` times as many replies. A client whose callers send at a
// fixed rate completes as many either way, and does not poll.
//
// A trial that starts as the load does (the first loaded moment, or after a gap in it) first
// lets it settle for a period, counted for neither mode: callers still starting up raise the
// rate fastest in the first periods, and the order above cancels a steady rise, not a curve.
// Trials repeat every `hold`, so a wrong choice (a noisy trial) or a changed workload costs at
// most that long; a trial spends half its length in the mode not chosen, ~5 % of the time.
//
// Decisions only: the I/O thread reports replies and the time, busy_poll_policy asks polling().
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace dlock::net {

class load_poll_trial {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr clock::duration period = std::chrono::milliseconds(50);
  static constexpr clock::duration hold = std::chrono::seconds(2);
  static constexpr double margin = 1.05;

  /// Whether to poll under load now: the trial's current period says, or the last trial did.
  bool polling() const noexcept { return step_ >= 0 ? step_polls(step_) : chosen_; }

  /// True while a trial runs (its periods are being counted).
  bool trying() const noexcept { return step_ >= 0; }

  /// One reply was completed.
  void note_reply() noexcept { ++replies_; }

  /// The I/O thread's clock, read at least every few milliseconds while the client is loaded.
  /// A longer gap (the client was idle, or not loaded) starts a new trial, from its settling
  /// period: the load that comes back may not be the one measured, and a trial's periods must
  /// each describe the same load. Otherwise a trial starts once `hold` has passed since the
  /// last.
  void note_time(clock::time_point now) noexcept {
    const bool gap = now - last_ > period / 2;
    last_ = now;
    if (gap) {
      start(now, settle);
      return;
    }
    if (step_ < 0) {
      if (now >= next_trial_) start(now, first);
      return;
    }
    if (now - step_start_ < period) return;
    if (step_ > settle) {
      const std::chrono::duration<double> length = now - step_start_;
      rates_[static_cast<std::size_t>(step_ - first)] =
          static_cast<double>(replies_) / length.count();
    }
    replies_ = 0;
    step_start_ = now;
    if (++step_ <= last) return;
    chosen_ = rates_[1] + rates_[2] > margin * (rates_[0] + rates_[3]);
    step_ = -1;
    next_trial_ = now + hold;
  }

 private:
  // A trial's periods: an optional settling one, then without, with, with, without.
  static constexpr int settle = 0, first = 1, last = 4;
  static constexpr bool step_polls(int step) noexcept { return step == 2 || step == 3; }

  void start(clock::time_point now, int step) noexcept {
    step_ = step;
    step_start_ = now;
    replies_ = 0;
  }

  int step_ = -1;  // the trial's period, or -1 between trials
  bool chosen_ = false;
  clock::time_point step_start_{};
  clock::time_point last_{};
  clock::time_point next_trial_{};  // the epoch: the first loaded moment starts one
  std::uint64_t replies_ = 0;
  std::array<double, 4> rates_{};
};

}  // namespace dlock::net
