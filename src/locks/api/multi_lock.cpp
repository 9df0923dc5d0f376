// dlock::multi_lock and multi_lease: several reentrant locks taken all or nothing, without
// deadlock. Each name is an ordinary reentrant lock (Redisson's RLock layout, its own fencing
// counter), and each hold an ordinary lease. Two paths:
//
//  - One script call (multi_acquire.lua) when every key of every name lives on one node in one
//    slot (a standalone server, a Sentinel master, names sharing a hash tag on a cluster): it
//    takes every name or none, and each grant becomes a lease through lock_core::adopt_grant.
//  - The ordered path otherwise, and for the rest of a wait that the one call could not satisfy
//    at once: the names one by one in sorted order, each through the reentrant lock's own
//    acquisition (event-driven waiting, local FIFO) within one common deadline; what was taken is
//    released, last first, if a name is not acquired by then.
//
// Why no deadlock: while it waits for a name, an acquisition holds only names that sort before
// it (the one-call path holds nothing while it waits: it took nothing). So in any cycle of
// waiters, each would hold a name sorting before the one it waits for, all the way round:
// impossible. Multi-locks over overlapping names, given in any order, cannot wait for each other
// in a cycle.
//
// Both paths run as one asynchronous acquisition (multi_acquisition): the one call's reply and
// each name's grant arrive on the I/O thread, which starts the next step, so a wait parks no
// thread; the blocking calls wait for its result.
#include "dlock/multi_lock.hpp"

#include <algorithm>
#include <optional>

#include "core/one_shot.hpp"
#include "core/user_callback.hpp"
#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "locks/runtime/lock_core.hpp"
#include "locks/runtime/multi_one_call.hpp"

namespace dlock {

using detail::lock_core;
using detail::steady;

namespace {

void release_all(std::vector<lease>& holds) noexcept {
  // Last taken, first released: the order the names were taken in, unwound.
  while (!holds.empty()) {
    holds.back().release();
    holds.pop_back();
  }
}

multi_acquire_result failure(std::error_code ec, std::string message) {
  return {{}, ec, std::move(message)};
}

// One acquisition of every name: the one call when it can reach them all, then (or else) the
// names one by one in order, each an ordinary acquisition of the reentrant lock started when the
// previous one is granted. start() runs on the caller's thread and hands over to the I/O thread
// (the one call's reply, or a post), where everything after it runs, cancel() included (a
// handle exists only once start() has returned). It holds the client by a plain reference: the
// client's teardown ends every pending acquisition and call (client_closed) before it lets go,
// and the leases taken so far each hold the client.
class multi_acquisition final : public detail::cancellable {
 public:
  multi_acquisition(lock_core& core, detail::multi_handles hs, lease_options o,
                    const detail::acquire_request& checked, detail::acquire_limits limits,
                    multi_acquire_callback done)
      : core_(core),
        hs_(std::move(hs)),
        o_(std::move(o)),
        step_options_(partial_hold_options(o_, handed_out_)),
        owner_(checked.owner),
        lease_time_(checked.lease_time),
        limits_(limits),
        done_(std::move(done)) {}

  void start() {
    if (!detail::one_call_reaches(core_, hs_)) {
      core_.io().post([self = self()] { self->next_name(); });
      return;
    }
    // The reply must come within one command timeout, and by the deadline when there is one.
    const auto now = steady::now();
    auto until = detail::saturating_add(now, core_.options().connection.command_timeout);
    if (!limits_.single_attempt) until = std::min(until, std::max(limits_.deadline, now));
    in_one_call_ = true;
    detail::send_one_call(
        core_, hs_, o_, owner_, lease_time_, until,
        [self = self()](detail::one_call_result r) { self->after_one_call(std::move(r)); });
  }

  void cancel() override {
    if (finished_) return;
    cancelled_ = true;
    if (in_one_call_) {
      // Not waited for: what the call brings back is released when it comes.
      finish(cancelled());
    } else if (step_) {
      step_->cancel();  // its completion, cancelled or (too late) granted, ends this one
    }                   // else next_name() is on its way, and sees `cancelled_`
  }

 private:
  // The ordered path's holds are the caller's only once every name is held: a hold lost before
  // that (its validity ran out while a later name was awaited) tells nobody, and is not handed
  // out (next_name checks). After the hand-off, losses reach the caller's on_lost as usual.
  static lease_options partial_hold_options(const lease_options& o,
                                            const std::shared_ptr<bool>& handed_out) {
    lease_options step = o;
    if (o.on_lost) {
      step.on_lost = [handed_out, user = o.on_lost](lease_lost_reason why) {
        if (*handed_out) user(why);
      };
    }
    return step;
  }

  std::shared_ptr<multi_acquisition> self() {
    return std::static_pointer_cast<multi_acquisition>(shared_from_this());
  }
  multi_acquire_result cancelled() const {
    return failure(make_error_code(errc::cancelled),
                   "acquiring locks " + detail::names_phrase(hs_) + ": cancelled");
  }

  void after_one_call(detail::one_call_result r) {
    using end = detail::one_call_result::end;
    in_one_call_ = false;
    if (finished_) return release_all(r.holds);  // cancelled meanwhile
    if (r.what == end::granted) return finish({multi_lease(std::move(r.holds)), {}, {}});
    release_all(r.holds);
    if (r.what == end::failed) return finish(failure(r.ec, std::move(r.message)));
    if (limits_.single_attempt || steady::now() >= limits_.deadline) {
      // As a single lock's attempt: a transient failure of a single attempt is an error, and so
      // is a grant too few replicas acknowledged; a held name or a born-dead grant is just
      // "not acquired".
      if (r.ec && (limits_.single_attempt || r.ec == errc::not_replicated)) {
        return finish(failure(r.ec, std::move(r.message)));
      }
      return finish({});
    }
    // Held elsewhere, or worth another try: the names one by one, event-driven, for the rest of
    // the wait. The one call took nothing, so the ordering invariant holds.
    next_name();
  }

  // Starts the acquisition of the next name not yet held, or ends with all of them.
  void next_name() {
    if (cancelled_) {
      release_all(holds_);
      return finish(cancelled());
    }
    const auto i = holds_.size();
    if (i == hs_.size()) {
      if (std::all_of(holds_.begin(), holds_.end(), [](const lease& l) { return l.valid(); })) {
        *handed_out_ = true;  // on this thread, where on_lost runs: no loss falls in between
        return finish({multi_lease(std::move(holds_)), {}, {}});
      }
      // A name was lost while a later one was awaited: start again, for what is left of the wait.
      release_all(holds_);
      if (limits_.single_attempt || steady::now() >= limits_.deadline) return finish({});
    }
    try {
      auto request =
          core_.make_request(*hs_[holds_.size()], step_options_, limits_,
                             [self = self()](acquire_result r) { self->after_step(std::move(r)); });
      // The owner settled on the caller's thread, not this one's.
      request.owner = owner_;
      request.names = request.kind->names_for(hs_[holds_.size()]->names, owner_);
      step_ = core_.acquire(std::move(request));
    } catch (const error& e) {
      release_all(holds_);
      finish(failure(e.code(), detail::bare_message(e)));
    }
  }

  void after_step(acquire_result r) {
    step_.reset();
    if (r.error || !r.held) {
      // The wait ended, or it failed: no partial hold is kept.
      release_all(holds_);
      return finish(r.error == errc::cancelled ? cancelled()
                    : r.error                  ? failure(r.error, std::move(r.message))
                                               : multi_acquire_result{});
    }
    holds_.push_back(std::move(r.held));
    next_name();
  }

  void finish(multi_acquire_result result) {
    if (std::exchange(finished_, true)) return;
    detail::call_user(done_, std::move(result));
    done_ = {};
  }

  lock_core& core_;
  const detail::multi_handles hs_;
  const lease_options o_;
  std::shared_ptr<bool> handed_out_ = std::make_shared<bool>(false);  // I/O thread only
  const lease_options step_options_;  // o_, with on_lost silent until the hand-off
  const std::string owner_;
  const std::chrono::milliseconds lease_time_;
  const detail::acquire_limits limits_;
  multi_acquire_callback done_;
  // From start() on, the I/O thread's alone.
  std::vector<lease> holds_;            // the names taken so far, in order
  std::optional<acquire_handle> step_;  // the name being acquired
  bool in_one_call_ = false;
  bool cancelled_ = false;
  bool finished_ = false;
};

multi_lease acquire_until(lock_core& core, const std::vector<std::string>& names,
                          const lease_options& o, steady::time_point deadline) {
  core.forbid_io_thread("acquiring a multi-lock synchronously");
  detail::one_shot<multi_acquire_result> result;
  multi_acquire_callback done = [&result](multi_acquire_result r) { result.put(std::move(r)); };
  detail::start_multi_acquisition(core, names, o, detail::limits_until(deadline), done);
  auto r = result.take();
  if (r.error) throw error(r.error, r.message);
  return std::move(r.held);
}

}  // namespace

namespace detail {

acquire_handle start_multi_acquisition(lock_core& core, const std::vector<std::string>& names,
                                       lease_options o, acquire_limits limits,
                                       multi_acquire_callback& done) {
  auto hs = multi_handles_for(core, names);
  // Checks the options and settles the owner, computed here on the caller's thread, and the
  // lease time.
  const auto checked = core.make_request(*hs.front(), o, {}, {});
  auto acquisition = std::make_shared<multi_acquisition>(core, std::move(hs), std::move(o), checked,
                                                         limits, std::move(done));
  auto handle = core.handle_for(acquisition);
  acquisition->start();
  return handle;
}

}  // namespace detail

// ---- multi_lease ----

bool multi_lease::valid() const noexcept {
  return !holds_.empty() &&
         std::all_of(holds_.begin(), holds_.end(), [](const lease& l) { return l.valid(); });
}

std::uint64_t multi_lease::fence(const std::string& name) const noexcept {
  for (const auto& l : holds_) {
    if (l.name() == name) return l.fence();
  }
  return 0;
}

bool multi_lease::release() noexcept {
  bool all = !holds_.empty();
  while (!holds_.empty()) {
    all = holds_.back().release() && all;
    holds_.pop_back();
  }
  return all;
}

// ---- multi_lock ----

multi_lock::multi_lock(std::shared_ptr<detail::lock_core> core, std::vector<std::string> names)
    : core_(std::move(core)), names_(std::move(names)) {}

multi_lease multi_lock::try_acquire(const lease_options& options) {
  return acquire_until(*core_, names_, options, steady::time_point::min());
}

multi_lease multi_lock::try_acquire_for(std::chrono::milliseconds wait,
                                        const lease_options& options) {
  if (wait.count() <= 0) return try_acquire(options);
  return acquire_until(*core_, names_, options, detail::saturating_add(steady::now(), wait));
}

multi_lease multi_lock::acquire(const lease_options& options) {
  return acquire_until(*core_, names_, options, steady::time_point::max());
}

acquire_handle multi_lock::start_async(std::chrono::milliseconds wait, multi_acquire_callback done,
                                       lease_options options, bool own_owner) {
  if (own_owner && options.owner.empty()) options.owner = detail::async_owner_id();
  try {
    return detail::start_multi_acquisition(*core_, names_, std::move(options),
                                           detail::limits_for_wait(wait), done);
  } catch (const error& e) {
    detail::report_on_io_thread<multi_acquire_result>(core_->io(), std::move(done), e);
    return {};
  }
}

}  // namespace dlock
