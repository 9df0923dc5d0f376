// How one watchdog round is cut into script calls: grouped by node, cluster slot and lock kind
// (one script call can only touch keys of one slot, and renews holds of one kind), at most
// `batch` holds per call. All calls of a round are handed to their nodes together, so each node
// gets them in one pipelined write. Sans-io: unit-tested without a server.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "locks/runtime/grant.hpp"
#include "topology/topology.hpp"

namespace dlock::detail {

struct renewal_batch {
  route where;
  const lock_kind* kind = nullptr;
  std::vector<std::shared_ptr<grant>> grants;
};

/// Cuts `watched` into batches; `route_of` says where each grant's lock lives. Batches come out
/// ordered by route, then kind, so a round is deterministic.
std::vector<renewal_batch> plan_renewals(const std::vector<std::shared_ptr<grant>>& watched,
                                         const std::function<route(const grant&)>& route_of,
                                         std::size_t batch);

}  // namespace dlock::detail
