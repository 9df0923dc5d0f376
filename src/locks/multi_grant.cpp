// Grants made outside the acquisition driver (a multi-lock's one script call over several
// names), handed out as ordinary leases: the same registration, watchdog, loss signalling and
// born-dead rule as the driver's own grants (acquire_driver.cpp: born_dead, grant_hold), so
// that nothing downstream (renewal, expiry watch, release, on_lost) can tell them apart.
#include "dlock/error.hpp"
#include "locks/core_state.hpp"

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
  const auto valid_until = validity_end(sent_at, r.lease_time);
  if (valid_until <= now) {
    // Born dead: handing it out would give the caller a lease lost at once while someone else
    // may take the lock. A re-entry joining a hold that is still good is not dead; one joining
    // a hold that ran out too means that hold is lost (which ends it on the server).
    const auto held = reentry ? grants_.find_live(*r.kind, r.names->name, owner) : nullptr;
    if (!held || !grants_.valid(*held, now)) {
      counters.grants_born_dead.fetch_add(1, std::memory_order_relaxed);
      if (held) {
        lose(held, lease_lost_reason::expired);
      } else {
        r.kind->drop(call_for(*r.names, owner, r.lease_time), [](std::error_code, reply) {});
      }
      return {};
    }
  }
  counters.grants.fetch_add(1, std::memory_order_relaxed);
  const auto added = grants_.add_hold(r, reentry, fence, valid_until);
  if (added.stale) lose(added.stale, lease_lost_reason::not_held);
  after_grant(added);
  auto state = std::make_shared<lease_state>();
  state->core = shared_from_this();
  state->g = added.g;
  state->hold_id = added.hold_id;
  return lease_state::make(std::move(state));
}

}  // namespace dlock::detail
