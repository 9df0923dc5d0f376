// Cancelling one acquisition (acquire_handle::cancel; a coroutine's stop token and asio's
// cancellation slots come through it): it completes at once with errc::cancelled, holding
// nothing. An attempt out at that moment is not waited for; the acquisition keeps its place in the
// local queue until that attempt's reply is in, and a grant the reply brings is undone on the
// server before any waiter queued behind it attempts (commands on a connection stay in order), as
// a born-dead grant is.
#include "dlock/async.hpp"
#include "dlock/error.hpp"
#include "locks/runtime/core_state.hpp"

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
  if (!fsm.finished()) {
    core->drive(std::static_pointer_cast<op>(shared_from_this()),
                acquisition_fsm::event::of(acquisition_fsm::event::type::cancel, steady::now()));
  }
}

}  // namespace detail
}  // namespace dlock
