// RedLock's end of a hold: the release or the drop on every master at once, decided by the
// majority of their answers, and the cleanup that decision leaves (stale counts, masters that
// were down).
#include <memory>
#include <utility>

#include "locks/kinds/redlock_rounds.hpp"

namespace dlock::detail::redlock_rounds {

namespace {

net::clock::time_point master_deadline(const quorum_timing& timing, const lock_call& c) {
  if (c.lease <= milliseconds(0)) return c.deadline;
  return std::min(c.deadline, net::clock::now() + timing.node_timeout(c.lease));
}

}  // namespace

release_round::release_round(const redlock_protocol& kind, const lock_call& c, hold_end how,
                             net::reply_callback done)
    : kind_(kind),
      call_{c.topo, c.names, c.owner, c.lease, std::string(c.identity)},
      settled_(c.settled),
      how_(how),
      early_(how == hold_end::release && !kind.base().reentrant()),
      always_final_(how != hold_end::release || !kind.base().reentrant()),
      deadline_(master_deadline(kind.timing(), c)) {
  lock_guard lock(mutex_);
  done_ = std::move(done);
}

void release_round::start() {
  const auto nodes = call_.topo.nodes_for(call_.names.name);
  {
    lock_guard lock(mutex_);
    counts_.resize(nodes.size());
  }
  auto self = shared_from_this();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto node = nodes[i];
    kind_.base().end_hold(
        call_.at(node, deadline_), how_,
        [self, i, node](std::error_code ec, reply r) { self->on_answer(i, node, ec, r); });
  }
}

// A master whose connection was down, or dropped with the call on the wire, gets the drop when
// it is back (drop_when_back) if the call ends the hold: a drop, a simple lock's release, or a
// reentrant release that most masters say was the last hold (decide).
void release_round::on_answer(std::size_t i, node_id node, std::error_code ec, const reply& r) {
  const bool lost = ec == errc::connection_lost;
  if (lost && always_final_) kind_.drop_when_back(call_, node);
  decided d;
  {
    lock_guard lock(mutex_);
    if (ec) {
      error_.note(ec, r);
      if (lost && !always_final_) lost_.push_back(node);
    } else if (r.is_integer()) {
      counts_[i] = r.integer();
    } else {
      ++not_held_;
    }
    ++answered_;
    if (!decide(d)) return;
  }
  finish(std::move(d));
}

bool release_round::decide(decided& d) {
  if (reported_) return false;  // early, by a majority
  const bool is_release = how_ == hold_end::release;
  const auto needed = majority_of(counts_.size());
  std::size_t held = 0, freed = 0, kept = 0;
  std::int64_t largest = 0;
  for (const auto& n : counts_) {
    if (!n) continue;
    ++held;
    largest = std::max(largest, *n);
    (*n >= 1 ? freed : kept) += 1;
  }
  if (answered_ < counts_.size() && !(early_ && held >= needed)) return false;
  if (freed > kept) d.on_return = std::move(lost_);
  if (held >= needed) {
    d.out = reply::integer(largest);
    // Most masters ended the hold, some still count one of this owner's: a stale count
    // (is_reentry). The majority decides; those masters let it go too.
    if (is_release && freed > kept) {
      const auto nodes = call_.topo.nodes_for(call_.names.name);
      for (std::size_t k = 0; k < counts_.size(); ++k) {
        if (counts_[k] == 0) d.stale.push_back(nodes[k]);
      }
    }
  } else if (is_release && held > 0 && kept == 0 && held + not_held_ >= needed) {
    // A majority no longer holds it: those that freed it, and those where it was not ours (a
    // master the grant's round found taken, by a holder whose release had not reached it yet).
    // Confirmed: it is off a majority now.
    d.out = reply::integer(largest);
  } else if (not_held_ >= needed) {
    d.out = reply();  // nil: a majority no longer held it
  } else {
    d.ec = error_.ec ? error_.ec : std::error_code(errc::connection_lost);
    d.out = error_.server_reply;
  }
  reported_ = true;
  d.report = std::move(done_);
  return true;
}

void release_round::finish(decided d) {
  for (const auto n : d.on_return)
    kind_.drop_when_back(call_, n);
  if (d.stale.empty()) {
    if (d.report) d.report(d.ec, std::move(d.out));
    return;
  }
  // Reported once the stale counts are gone: the caller may exit right after unlock().
  auto left = std::make_shared<std::pair<std::size_t, net::reply_callback>>(
      d.stale.size(),
      [report = std::move(d.report), ec = d.ec, out = d.out](std::error_code, reply) {
        if (report) report(ec, out);
      });
  for (const auto n : d.stale) {
    kind_.base().drop(call_.at(n, deadline_), [left](std::error_code e, reply x) {
      if (--left->first == 0) left->second(e, std::move(x));
    });
  }
}

}  // namespace dlock::detail::redlock_rounds
