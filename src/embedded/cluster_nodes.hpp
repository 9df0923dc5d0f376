// CLUSTER NODES as the embedded cluster reads it (redis_cluster.cpp, redis_cluster_faults.cpp).
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace dlock::embedded {

/// One line of CLUSTER NODES: "<id> <ip:port@cport[,host]> <flags> <master-id> ...".
struct cluster_node_line {
  std::string id, flags, master_id;
  std::uint16_t port = 0;
};

inline std::vector<cluster_node_line> parse_cluster_nodes(const std::string& text) {
  std::vector<cluster_node_line> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    cluster_node_line n;
    std::string addr;
    if (!(fields >> n.id >> addr >> n.flags >> n.master_id)) continue;
    const auto colon = addr.rfind(':', addr.find('@'));
    if (colon == std::string::npos) continue;
    n.port = static_cast<std::uint16_t>(std::stoul(addr.substr(colon + 1)));
    out.push_back(n);
  }
  return out;
}

}  // namespace dlock::embedded
