// Faults a test injects into the embedded cluster: a node killed or paused, having first noted
// which slots it served and which nodes replicate it, and the wait for one of those replicas to
// take its slots over.
#include <algorithm>

#include "cluster_nodes.hpp"
#include "embedded/redis_cluster.hpp"
#include "embedded/resp_client.hpp"
#include "poller.hpp"

namespace dlock::embedded {

redis_cluster::killed_master redis_cluster::snapshot(std::size_t master) {
  const auto port = advertised_port(master);
  // Asked of the master itself while it lives; afterwards only the others know.
  std::size_t asked = master;
  if (!node(master).answering()) {
    asked = nodes_.size();
    for (std::size_t i = 0; i < nodes_.size() && asked == nodes_.size(); ++i) {
      if (nodes_[i]->answering()) asked = i;
    }
    if (asked == nodes_.size()) throw server_error("no cluster node is running");
  }
  killed_master k;
  for (const auto& r : slots_of(asked)) {
    if (r.master_port == port) k.ranges.push_back(r);
  }
  // CLUSTER SLOTS leaves out replicas it considers unusable; CLUSTER NODES lists every one.
  const auto nodes = resp_client(node(asked).port()).checked({"CLUSTER", "NODES"}).text;
  for (const auto& n : parse_cluster_nodes(nodes)) {
    if (n.master_id == ids_.at(master) && n.flags.find("slave") != std::string::npos) {
      k.replicas.push_back(index_of_port(n.port));
    }
  }
  return k;
}

void redis_cluster::remember_slots(std::size_t i) {
  if (!node(i).answering()) return;
  try {
    auto k = snapshot(i);
    if (!k.ranges.empty()) killed_[i] = std::move(k);
  } catch (const server_error&) {
    // wait_failover asks the survivors instead
  }
}

void redis_cluster::kill_node(std::size_t i) {
  remember_slots(i);
  node(i).kill();
}

void redis_cluster::pause_node(std::size_t i) {
  remember_slots(i);
  node(i).pause();
}

std::size_t redis_cluster::wait_failover(std::size_t killed, std::chrono::milliseconds timeout) {
  const auto it = killed_.find(killed);
  const killed_master k = it != killed_.end() ? it->second : snapshot(killed);
  if (k.ranges.empty()) {
    throw server_error("wait_failover: node " + std::to_string(killed) + " served no slots");
  }
  if (k.replicas.empty()) {
    throw server_error("wait_failover: node " + std::to_string(killed) + " has no replica");
  }
  // A replica has taken over once it says so and every running node routes the slots to it.
  auto took_over = [&](std::size_t r) {
    const auto port = advertised_port(r);
    const auto role = resp_client(node(r).port()).checked({"ROLE"});
    if (role.elements.empty() || role.elements[0].text != "master") return false;
    for (std::size_t n = 0; n < nodes_.size(); ++n) {
      if (!nodes_[n]->answering()) continue;
      const auto map = slots_of(n);
      for (const auto& want : k.ranges) {
        std::size_t served = 0;
        for (const auto& have : map) {
          if (have.master_port != port || have.last < want.first || have.first > want.last) {
            continue;
          }
          served += std::min(have.last, want.last) - std::max(have.first, want.first) + 1u;
        }
        if (served != want.last - want.first + 1u) return false;
      }
    }
    return true;
  };
  poller p(timeout);
  std::string last_error;
  do {
    for (const auto r : k.replicas) {
      if (!node(r).answering()) continue;
      try {
        if (took_over(r)) {
          killed_.erase(killed);
          return r;
        }
      } catch (const server_error& e) {
        last_error = e.what();
      }
    }
  } while (p.again());
  throw server_error("no replica of node " + std::to_string(killed) + " took over its slots in " +
                     ms(timeout) + (last_error.empty() ? "" : " (" + last_error + ")") + "\n" +
                     describe());
}

}  // namespace dlock::embedded
