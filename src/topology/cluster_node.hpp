// A node of a cluster as cluster_topology's files see it (cluster.cpp, cluster_slot_map.cpp).
#pragma once

#include <memory>

#include "net/redis_client_impl.hpp"
#include "topology/cluster.hpp"

namespace dlock::detail {

struct cluster_topology::node {
  node_address address;
  std::unique_ptr<redis_client> client;
  redis_client::impl* impl = nullptr;
  bool displaced_handler_set = false;  // I/O thread only
};

}  // namespace dlock::detail
