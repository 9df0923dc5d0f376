// Shared by the kinds' renew(): one script call over many holds, as two keys per hold (its lock's
// and its holder record's, or the lock's alone when the client records no holders) and two
// arguments (its owner and its new lease).
#pragma once

#include <string>
#include <vector>

#include "locks/kinds/lock_kind.hpp"

namespace dlock::detail {

inline void send_renewal(topology& t, node_id node, const script& s,
                         std::span<const renewal_item> items, net::clock::time_point deadline,
                         net::reply_callback done) {
  std::vector<std::string_view> keys;
  std::vector<std::string> lease_ms;
  std::vector<std::string_view> args;
  keys.reserve(items.size() * 2);
  lease_ms.reserve(items.size());
  args.reserve(items.size() * 2);
  for (const auto& item : items) {
    keys.push_back(*item.name);
    if (item.holder_key) keys.push_back(*item.holder_key);
    lease_ms.push_back(std::to_string(item.lease.count()));
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    args.push_back(*items[i].owner);
    args.push_back(lease_ms[i]);
  }
  // Acknowledged by replicas when the client asks for it: a renewal a promoted replica lacks
  // would leave the lease shorter there than the holder believes.
  t.eval(node, s, keys, args, deadline, durability::replicas, std::move(done));
}

}  // namespace dlock::detail
