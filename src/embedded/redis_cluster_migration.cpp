// Moving a slot between masters of the embedded cluster, as redis-cli --cluster reshard does:
// importing and migrating marks, the keys moved with MIGRATE, then the new owner announced to
// every master. Left half-way, clients meet ASK redirects.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "embedded/redis_cluster.hpp"
#include "embedded/resp_client.hpp"
#include "poller.hpp"

namespace dlock::embedded {

void redis_cluster::begin_migration(std::uint16_t slot, std::size_t from, std::size_t to) {
  const auto s = std::to_string(slot);
  // Importing first: from the moment the source says MIGRATING, its ASK redirects must be
  // honoured by the target.
  resp_client(node(to).port()).checked({"CLUSTER", "SETSLOT", s, "IMPORTING", node_id(from)});
  resp_client(node(from).port()).checked({"CLUSTER", "SETSLOT", s, "MIGRATING", node_id(to)});
}

std::size_t redis_cluster::move_keys(std::uint16_t slot, std::size_t from, std::size_t to,
                                     std::size_t max_keys) {
  resp_client source(node(from).port());
  std::size_t moved = 0;
  while (moved < max_keys) {
    const auto batch = std::min<std::size_t>(max_keys - moved, 100);
    const auto keys =
        source.checked({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), std::to_string(batch)});
    if (keys.elements.empty()) break;
    // REPLACE: while the slot migrates, the source's copy of a key is the one clients see.
    std::vector<std::string> args = {"MIGRATE", "127.0.0.1", std::to_string(node(to).port()),
                                     "",        "0",         "5000",
                                     "REPLACE", "KEYS"};
    for (const auto& key : keys.elements)
      args.push_back(key.text);
    source.checked(args);
    moved += keys.elements.size();
  }
  return moved;
}

void redis_cluster::finish_migration(std::uint16_t slot, std::size_t from, std::size_t to) {
  move_keys(slot, from, to, static_cast<std::size_t>(-1));
  const auto s = std::to_string(slot);
  // The target first, so that the slot never has no owner willing to serve it; then the source,
  // which stops redirecting with ASK; then the other masters, so that gossip need not.
  std::vector<std::size_t> order = {to, from};
  for (const auto m : master_indexes()) {
    if (m != to && m != from) order.push_back(m);
  }
  for (const auto n : order)
    resp_client(node(n).port()).checked({"CLUSTER", "SETSLOT", s, "NODE", node_id(to)});
  poller p(
      std::max<std::chrono::milliseconds>(options_.node_timeout * 10, std::chrono::seconds(10)));
  std::string problem;
  do {
    problem.clear();
    for (std::size_t n = 0; n < nodes_.size() && problem.empty(); ++n) {
      if (!nodes_[n]->answering()) continue;
      try {
        bool owned = false;
        for (const auto& r : slots_of(n)) {
          owned =
              owned || (r.first <= slot && slot <= r.last && r.master_port == advertised_port(to));
        }
        if (!owned)
          problem = "node " + std::to_string(n) + " does not route the slot to node " +
                    std::to_string(to);
      } catch (const server_error& e) {
        problem = e.what();
      }
    }
    if (problem.empty()) return;
  } while (p.again());
  throw server_error("finish_migration of slot " + s + ": " + problem + "\n" + describe());
}

void redis_cluster::migrate_slot(std::uint16_t slot, std::size_t from, std::size_t to,
                                 bool finish) {
  begin_migration(slot, from, to);
  move_keys(slot, from, to, static_cast<std::size_t>(-1));
  if (finish) finish_migration(slot, from, to);
}

}  // namespace dlock::embedded
