// Grants made outside the acquisition driver (a multi-lock's one script call over several
// names), handed out as ordinary leases: the same registration, watchdog, loss signalling and
// born-dead rule as the driver's own grants (acquisition_fsm::undo_if_dead, hand_out), so
// that nothing downstream (renewal, expiry watch, release, on_lost) can tell them apart.
#include "dlock/error.hpp"
#include "locks/runtime/core_state.hpp"

namespace dlock::detail {

lease lock_core::adopt_grant(const lock_handle& h, const std::string& owner, const lease_options& o,
                             std::uint64_t fence, bool reentry, steady::time_point sent_at) {
  // The request the driver would have built for this lock (lease time, watchdog or fixed,
  // on_lost); the owner is the one the script granted to, which the caller computed on its own
  // thread (a thread's owner id differs from the I/O thread's).
  auto r = make_request(h, o, {}, [](acquire_result) {});
  r.owner = owner;
  r.names = r.kind->names_for(h.names, owner);
  const auto now = steady::now();
  attempt_reply got;
  got.what = reentry ? attempt_reply::type::reentered : attempt_reply::type::granted;
  got.sent_at = sent_at;
  if (reentry) got.joined_hold = joined_hold(r, now);
  const auto valid_until = validity_end(sent_at, r.lease_time);
  if (const auto how = acquisition_fsm::undo_if_dead(got, valid_until - sent_at, now)) {
    undo_grant(r, *how, true);
    return {};
  }
  return hand_out(r, reentry, fence, valid_until);
}

}  // namespace dlock::detail
