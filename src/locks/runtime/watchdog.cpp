// The watchdog, which renews every watchdog lease the client holds in one pipelined round per
// period, and the expiry watch, which declares a lease lost once its validity passes without a
// renewal, however that came about: the server unreachable, this process paused, the I/O thread
// starved. Both run on the I/O thread.
#include <algorithm>

#include "dlock/error.hpp"
#include "locks/runtime/core_state.hpp"
#include "locks/runtime/renewal_plan.hpp"

namespace dlock::detail {

void lock_core::after_grant(const grant_registry::added& a) {
  if (a.earlier_expiry) {
    io().post(unowned([this] { arm_expiry_check(); }));
  }
  if (a.g->watchdog) {
    // A grant whose reply was slow to come has less validity left than the watchdog's rhythm
    // assumes: renew it now rather than at the next round, which may come too late.
    const bool soon = grants_.valid_until(*a.g) - steady::now() < 2 * watchdog_period_;
    io().post(unowned([this, soon] { schedule_renewal(soon); }));
  }
}

void lock_core::schedule_renewal(bool soon) {
  on_io_thread();
  if (!rt_ || (rt_->renew_scheduled && !soon)) return;
  rt_->renew_scheduled = true;
  // Re-arming cancels a wait already pending (its handler sees operation_aborted).
  rt_->renew_due = steady::now() + (soon ? steady::duration(0) : watchdog_period_);
  rt_->renew_timer.expires_at(rt_->renew_due);
  rt_->renew_timer.async_wait(unowned([this](std::error_code ec) {
    if (!ec) renew_all();
  }));
}

// One round: every watchdog lease, in batches per node, slot and kind, handed to the topology at
// once so that each node's batches leave in one pipelined write. A hold released meanwhile is
// harmless: renewals only extend a lock its owner still holds.
void lock_core::renew_all() {
  on_io_thread();
  rt_->renew_scheduled = false;
  const auto sent_at = steady::now();
  auto* metrics = observer_.metrics();
  const auto deadline =
      sent_at + std::min<steady::duration>(options_.connection.command_timeout, watchdog_period_);
  const auto batches = plan_renewals(
      grants_.watched(),
      [this](const grant& g) {
        const auto node = topology_->nodes_for(g.names->name).front();
        return topology_->route_of(node, g.names->name);
      },
      options_.renewal_batch);
  if (batches.empty()) return;  // nothing to watch: sleep until the next watchdog grant
  if (metrics) metrics->renewal_lag(sent_at - rt_->renew_due);
  for (const auto& b : batches) {
    std::vector<renewal_item> items;
    items.reserve(b.grants.size());
    for (const auto& g : b.grants)
      items.push_back(
          {&g->names->name, record_key_of(*g->names), &g->owner, grants_.lease_time(*g)});
    auto grants = std::make_shared<std::vector<std::shared_ptr<grant>>>(b.grants);
    b.kind->renew(*topology_, b.where.node, items, deadline,
                  unowned([this, grants, sent_at, metrics](std::error_code ec, const reply& r) {
                    if (metrics && ec != errc::client_closed) {
                      metrics->round_trip(timed_command::renew, steady::now() - sent_at);
                    }
                    // A failed round changes nothing: if no later round succeeds in time, the
                    // expiry check declares the leases lost.
                    // Renewed on the master only (too few replicas acknowledged): holds
                    // are still held, but their validity stays where the replicas have it.
                    const bool acknowledged = ec != errc::not_replicated;
                    if (!acknowledged) {
                      ec = {};
                      note_renewal_failure(*grants, "too few replicas acknowledged the renewal");
                    }
                    if (ec == errc::client_closed) return;
                    if (ec || !r.is_array() || r.elements().size() != grants->size()) {
                      note_renewal_failure(*grants, ec ? (r.is_error() ? r.str() : ec.message())
                                                       : "the renewal's reply had the wrong shape");
                      return;
                    }
                    for (std::size_t i = 0; i < grants->size(); ++i) {
                      const auto& g = (*grants)[i];
                      const auto& v = r.elements()[i];
                      if (v.is_integer() && v.integer() == 1) {
                        if (!acknowledged) continue;
                        grants_.renewed(*g, validity_end(sent_at, grants_.lease_time(*g)));
                        counters.leases_renewed.fetch_add(1, std::memory_order_relaxed);
                      } else if (v.is_integer() && v.integer() == renewal_undecided) {
                        // RedLock: too few masters answered to tell; not renewed
                        note_renewal_failure({g}, "too few RedLock masters answered");
                        continue;
                      } else {
                        lose(g, lease_lost_reason::not_held);
                      }
                    }
                  }));
  }
  counters.renewal_calls.fetch_add(batches.size(), std::memory_order_relaxed);
  counters.renewal_rounds.fetch_add(1, std::memory_order_relaxed);
  schedule_renewal();
}

void lock_core::arm_expiry_check() {
  on_io_thread();
  if (!rt_) return;
  const auto at = grants_.next_expiry();
  if (at == steady::time_point::max()) return;
  rt_->expiry_timer.expires_at(at);
  rt_->expiry_timer.async_wait(unowned([this](std::error_code ec) {
    if (!ec) check_expiry();
  }));
}

void lock_core::check_expiry() {
  auto [expired, next] = grants_.expired(steady::now());
  for (const auto& g : expired)
    lose(g, lease_lost_reason::expired);
  arm_expiry_check();
}

}  // namespace dlock::detail
