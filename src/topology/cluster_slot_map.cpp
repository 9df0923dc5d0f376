// The cluster topology's slot map: fetched again (CLUSTER SLOTS) after a MOVED, a node that
// became unreachable or a displaced subscription, and applied to the owner of every slot; and
// the sharded subscriptions, each on the node that owns its channel's slot, moved when the map
// moves that slot.
#include <algorithm>

#include "dlock/error.hpp"
#include "topology/cluster.hpp"
#include "topology/cluster_node.hpp"

namespace dlock::detail {

// ---- the slot map ----

void cluster_topology::refresh_later() {
  if (closed_) return;
  if (refreshing_) {
    refresh_wanted_ = true;
    return;
  }
  refresh_map();
}

void cluster_topology::refresh_map() {
  refreshing_ = true;
  refresh_wanted_ = false;
  // Ask a node that is up, masters first; when none is, the next failed attempt asks again.
  std::vector<std::shared_ptr<node>> candidates;
  {
    lock_guard lock(nodes_mutex_);
    candidates = nodes_;
  }
  std::shared_ptr<node> asked;
  for (const auto& n : candidates) {
    if (n->impl->commands->up()) {
      asked = n;
      break;
    }
  }
  if (!asked) {
    refreshing_ = false;
    // Nobody to ask now; try again shortly, backing off while the cluster stays unreachable.
    refresh_backoff_ = std::clamp(refresh_backoff_ * 2, std::chrono::milliseconds(50),
                                  std::chrono::milliseconds(1000));
    refresh_timer_.expires_after(refresh_backoff_);
    refresh_timer_.async_wait([this](std::error_code ec) {
      if (!ec && !closed_ && !refreshing_) refresh_map();
    });
    return;
  }
  const std::string_view args[] = {"CLUSTER", "SLOTS"};
  const auto deadline = net::clock::now() + node_options_.command_timeout;
  asked->impl->commands->submit(args, deadline, [this, asked](std::error_code ec, reply r) {
    refreshing_ = false;
    if (closed_) return;
    std::optional<slot_ranges> map;
    if (!ec) map = parse_cluster_slots(r, asked->address.host);
    if (map && !map->ranges.empty()) {
      counters_.map_refreshes.fetch_add(1, std::memory_order_relaxed);
      refresh_backoff_ = std::chrono::milliseconds(0);
      apply(*map);
    } else {
      refresh_wanted_ = true;  // ask again, perhaps another node
    }
    if (refresh_wanted_) {
      // Not at once: a MOVED storm during a migration would otherwise fetch the map per reply.
      refresh_timer_.expires_after(std::chrono::milliseconds(50));
      refresh_timer_.async_wait([this](std::error_code timer_ec) {
        if (!timer_ec && !closed_ && !refreshing_) refresh_map();
      });
    }
  });
}

void cluster_topology::apply(const slot_ranges& map) {
  std::vector<bool> owns;
  for (const auto& range : map.ranges) {
    const node_id id = node_for(range.master);
    if (owns.size() <= id) owns.resize(id + 1, false);
    owns[id] = true;
    for (std::uint32_t slot = range.first; slot <= range.last; ++slot)
      owner_[slot].store(id, std::memory_order_relaxed);
  }
  rehome_subscriptions();
  // Commands waiting for a node that is down and owns nothing any more (a failed-over master)
  // go to the new owner now rather than failing at their deadlines (on_reply resends them).
  std::vector<std::shared_ptr<node>> all;
  {
    lock_guard lock(nodes_mutex_);
    all = nodes_;
  }
  for (node_id id = 0; id < all.size(); ++id) {
    if ((id >= owns.size() || !owns[id]) && !all[id]->impl->commands->up()) {
      all[id]->impl->commands->fail_unsent(errc::connect_failed);
    }
  }
}

// ---- sharded subscriptions ----

void cluster_topology::place(subscription_record& s) {
  s.where = owner_[key_slot(s.channel)].load(std::memory_order_relaxed);
  auto n = node_at(s.where);
  auto& sub = n->impl->subscriber();
  if (!std::exchange(n->displaced_handler_set, true)) {
    // The server dropped or refused a sharded subscription: its slot moved. Fetch the map;
    // applying it moves every subscription whose slot changed owner.
    sub.set_displaced_handler([this](const std::string&) { refresh_later(); });
  }
  s.inner = sub.add(net::subscriber::kind::shard_channel, s.channel, s.on_message, s.on_subscribed);
}

std::uint64_t cluster_topology::subscribe(node_id, const std::string& channel,
                                          message_handler on_message,
                                          std::function<void()> on_subscribed) {
  const auto id = next_subscription_++;
  auto& s = subscriptions_[id];
  s.channel = channel;
  s.on_message = std::move(on_message);
  s.on_subscribed = std::move(on_subscribed);
  place(s);
  return id;
}

void cluster_topology::unsubscribe(std::uint64_t id) {
  auto it = subscriptions_.find(id);
  if (it == subscriptions_.end()) return;
  node_at(it->second.where)->impl->subscriber().remove(it->second.inner);
  subscriptions_.erase(it);
}

void cluster_topology::rehome_subscriptions() {
  for (auto& [id, s] : subscriptions_) {
    if (owner_[key_slot(s.channel)].load(std::memory_order_relaxed) == s.where) continue;
    node_at(s.where)->impl->subscriber().remove(s.inner);
    place(s);
  }
}

}  // namespace dlock::detail
