#include "locks/kinds/redlock_rounds.hpp"

namespace dlock::detail {
namespace redlock_rounds {

// ---- renewal_round ----

renewal_round::renewal_round(const redlock_protocol& kind, topology& t,
                             std::span<const renewal_item> items, std::size_t masters,
                             net::reply_callback done)
    : kind_(kind), topo_(t), masters_(masters) {
  for (const auto& item : items) {
    names_.push_back(*item.name);
    holder_keys_.push_back(item.holder_key ? *item.holder_key : std::string());
    owners_.push_back(*item.owner);
    leases_.push_back(item.lease);
  }
  for (std::size_t i = 0; i < names_.size(); ++i)
    items_.push_back({&names_[i], holder_keys_[i].empty() ? nullptr : &holder_keys_[i], &owners_[i],
                      leases_[i]});
  lock_guard lock(mutex_);
  renewed_.assign(items_.size(), 0);
  refused_.assign(items_.size(), 0);
  done_ = std::move(done);
}

void renewal_round::start(net::clock::time_point deadline) {
  if (items_.empty() || masters_ == 0) {
    net::reply_callback done;
    {
      lock_guard lock(mutex_);
      done = std::move(done_);
    }
    if (done) done({}, reply::array({}));
    return;
  }
  const auto nodes = topo_.nodes_for(names_.front());
  auto self = shared_from_this();
  for (const auto node : nodes) {
    kind_.base().renew(topo_, node, items_, deadline,
                       [self](std::error_code ec, reply r) { self->on_reply(ec, r); });
  }
}

void renewal_round::on_reply(std::error_code ec, const reply& r) {
  std::vector<reply> verdicts;
  std::vector<std::size_t> lost;
  net::reply_callback done;
  {
    lock_guard lock(mutex_);
    // A master that failed, or answered something else, counts as neither.
    if (!ec && r.is_array() && r.elements().size() == items_.size()) {
      for (std::size_t k = 0; k < items_.size(); ++k) {
        const auto& v = r.elements()[k];
        (v.is_integer() && v.integer() == 1 ? renewed_[k] : refused_[k]) += 1;
      }
    }
    if (++answered_ < masters_) return;
    const auto needed = majority_of(masters_);
    for (std::size_t k = 0; k < items_.size(); ++k) {
      if (renewed_[k] >= needed) {
        verdicts.push_back(reply::integer(1));
      } else if (refused_[k] > masters_ - needed) {
        verdicts.push_back(reply::integer(0));
        lost.push_back(k);
      } else {
        verdicts.push_back(reply::integer(renewal_undecided));
      }
    }
    done = std::move(done_);
  }
  // A hold a majority no longer has is lost; the masters that did extend it let it go now
  // rather than when their extension runs out.
  const auto nodes = topo_.nodes_for(names_.front());
  for (const auto k : lost) {
    const lock_names names(names_[k]);
    for (const auto node : nodes) {
      kind_.base().drop({topo_, node, names, owners_[k], leases_[k], cleanup_deadline({})},
                        [](std::error_code, reply) {});
    }
  }
  if (done) done({}, reply::array(std::move(verdicts)));
}
}  // namespace redlock_rounds

std::unique_ptr<lock_kind> make_redlock_kind(const lock_kind& base, quorum_timing timing,
                                             quorum_counters& counters) {
  return std::make_unique<redlock_rounds::redlock_protocol>(base, timing, counters);
}

}  // namespace dlock::detail
