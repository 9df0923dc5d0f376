// Cancelling one acquisition (acquire_handle::cancel; a coroutine's stop token and asio's
// cancellation slots come through it): it completes at once with errc::cancelled, holding
// nothing. An attempt out at that moment is not waited for; the acquisition keeps its place in the
// local queue until that attempt's reply is in, and a grant the reply brings is undone on the
// server before any waiter queued behind it attempts (commands on a connection stay in order), as
// a born-dead grant is.
#include "dlock/async.hpp"
#include "dlock/error.hpp"
#include "locks/core_state.hpp"

namespace dlock {

void acquire_handle::cancel() const noexcept {
  if (auto io = io_.lock()) detail::lock_core::cancel(*io, op_);
}

namespace detail {

void lock_core::cancel(net::io_thread& io, std::weak_ptr<cancellable> target) noexcept {
  try {
    io.post([target = std::move(target)] {
      // Handlers run only while the core is whole (its teardown stops this thread), and an
      // acquisition that has not finished has not been through that teardown, which finishes
      // every pending one.
      if (const auto t = target.lock()) t->cancel();
    });
  } catch (...) {
    // No memory for the handler: the acquisition runs its course, as if cancelled too late.
  }
}

acquire_handle lock_core::handle_for(const std::shared_ptr<cancellable>& target) const {
  acquire_handle handle;
  handle.io_ = io_;
  handle.op_ = target;
  return handle;
}

void lock_core::op::cancel() {
  if (!finished) core->cancel_now(std::static_pointer_cast<op>(shared_from_this()));
}

void lock_core::cancel_now(const std::shared_ptr<op>& o) {
  // An attempt out now is settled when its reply comes (finish).
  finish(o, {{}, errc::cancelled, "acquiring lock '" + o->req.names->name + "': cancelled"});
}

// The reply to the attempt that was out when `o` was cancelled.
void lock_core::settle_cancelled(const std::shared_ptr<op>& o, std::error_code ec, const reply& r) {
  o->settling = false;
  // Until what follows has reached the server, a closing client waits: an undo is tracked on its
  // own, a place handed back keeps this guard until its reply.
  const auto settled = std::move(o->settle_guard);
  bool undone = false;
  if (!ec || ec == errc::not_replicated) {  // not_replicated: granted on the master all the same
    const auto outcome = o->req.kind->decode_attempt(r);
    using type = attempt_outcome::type;
    if (outcome.what == type::granted || outcome.what == type::reentered) {
      // Exactly the hold this attempt added goes, as a release would: a re-entry's count, or the
      // lock if it was a fresh grant. Not a drop, which ends the owner's hold whatever its count:
      // another acquisition by the same owner (the thread's own try_acquire, say) may have
      // re-entered this grant since, and its hold must stay.
      o->req.kind->release(call_for(*o->req.names, o->req.owner, o->req.lease_time, o->req.permits),
                           undo_tracked());
      undone = true;
    }
  } else if (ec == errc::timeout || ec == errc::connection_lost) {
    discard_uncertain_grant(*o);  // the script may have run
  }
  if (!undone) {
    step_aside(o, false, [settled] {});
    return;
  }
  // The release has gone out (and handed the lock on); the next waiter here tries after it.
  if (o->queued) leave_queue(o, false);
}

}  // namespace detail
}  // namespace dlock
