// A private Redis Cluster of real redis-server processes for tests: every node on a free loopback
// port (below 55535, with its bus port, port+10000, free too) in its own temporary directory,
// joined with `redis-cli --cluster create`, and stopped by PID when the object goes (or by the
// kernel if this process dies first). Node indexes are fixed for the cluster's life; which of
// them are masters is always asked of the cluster, since failovers change it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "embedded/redis_server.hpp"

namespace dlock::embedded {

struct cluster_options {
  int masters = 3;
  int replicas_per_master = 0;
  /// cluster-node-timeout: how long a silent node takes to be failed over.
  std::chrono::milliseconds node_timeout{1000};
  /// Appended to every node's command line.
  std::vector<std::string> extra_args{};
  /// How long the constructor waits for the cluster to form.
  std::chrono::milliseconds start_timeout{60000};
  /// If set, called with each node's port once it is chosen; the node then announces the port
  /// returned (cluster-announce-port; its bus stays on its own port + 10000), so that clients
  /// and replicas reach it there, a proxy in front of it for instance.
  std::function<std::uint16_t(std::uint16_t port)> announce_port{};
};

/// True if redis-server and redis-cli (which creates the cluster) can be found.
bool cluster_available();

class redis_cluster {
 public:
  /// Starts the nodes, creates the cluster and waits until it is healthy (`wait_healthy`).
  /// Throws `server_error` with the nodes' log tails if it does not come up.
  explicit redis_cluster(cluster_options options = {});
  /// Kills every node and removes their directories. Never throws.
  ~redis_cluster();
  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;

  /// The number of nodes, masters and replicas.
  std::size_t size() const noexcept { return nodes_.size(); }
  /// Node `i` (0 <= i < size()).
  redis_server& node(std::size_t i) { return *nodes_.at(i); }
  /// The cluster's id of node `i` (CLUSTER MYID), stable across restarts.
  const std::string& node_id(std::size_t i) const { return ids_.at(i); }
  /// The port clients and replicas reach node `i` at: its own, or the one `announce_port` gave.
  std::uint16_t advertised_port(std::size_t i) const;
  /// redis://127.0.0.1:PORT of every node, at its advertised port.
  std::vector<std::string> seed_urls() const;
  /// The indexes of the nodes that serve slots now, as a running node reports them.
  std::vector<std::size_t> master_indexes();
  /// The index of the node that serves `slot` now, as a running node reports it.
  std::size_t master_of_slot(std::uint16_t slot);
  /// Redis Cluster's slot of `key`: CRC16 (XMODEM) mod 16384 of the key, or of its hash tag.
  static std::uint16_t key_slot(std::string_view key);

  /// Waits until every running node reports cluster_state:ok and all 16384 slots assigned,
  /// knows every node, agrees with the others on the owner of every slot (a running node), and
  /// every running replica has master_link_status:up. Throws `server_error` on timeout.
  void wait_healthy(std::chrono::milliseconds timeout);
  /// SIGKILLs node `i`, remembering first which slots it served and its replicas, for
  /// `wait_failover`.
  void kill_node(std::size_t i);
  /// SIGSTOPs node `i`, remembering what `kill_node` does, so that `wait_failover` can wait for
  /// its replica to take over. `node(i).resume()` continues it.
  void pause_node(std::size_t i);
  /// Waits until one of the killed (or paused) master's replicas is a master serving all its slots
  /// on every running node; returns that replica's index. Throws `server_error` on timeout.
  std::size_t wait_failover(std::size_t killed_master, std::chrono::milliseconds timeout);

  /// Moves `slot` from master `from` to master `to` with every key in it; with `finish`, assigns
  /// it to `to` on all masters, otherwise leaves it migrating (clients get ASK redirects).
  void migrate_slot(std::uint16_t slot, std::size_t from, std::size_t to, bool finish);
  /// Marks `slot` importing on `to` and migrating on `from`.
  void begin_migration(std::uint16_t slot, std::size_t from, std::size_t to);
  /// MIGRATEs up to `max_keys` keys of `slot` from `from` to `to`; returns how many moved.
  std::size_t move_keys(std::uint16_t slot, std::size_t from, std::size_t to, std::size_t max_keys);
  /// Moves the keys left, assigns `slot` to `to` on every master and waits until every running
  /// node reports `to` as its owner.
  void finish_migration(std::uint16_t slot, std::size_t from, std::size_t to);

 private:
  struct slot_range {
    std::uint16_t first = 0, last = 0;
    std::uint16_t master_port = 0;
    std::vector<std::uint16_t> replica_ports;
    bool operator==(const slot_range& o) const {
      return first == o.first && last == o.last && master_port == o.master_port;
    }
  };
  using slot_map = std::vector<slot_range>;
  struct killed_master {
    slot_map ranges;
    std::vector<std::size_t> replicas;
  };

  void create();
  slot_map slots_of(std::size_t i);
  slot_map any_slots();
  std::size_t index_of_port(std::uint16_t port) const;
  std::string health_problem();
  std::string describe();
  killed_master snapshot(std::size_t master);
  void remember_slots(std::size_t i);

  cluster_options options_;
  std::vector<std::unique_ptr<redis_server>> nodes_;
  std::vector<std::string> ids_;
  std::map<std::size_t, killed_master> killed_;
  std::map<std::uint16_t, std::uint16_t> advertised_;  // a node's port -> announce_port's
};

}  // namespace dlock::embedded
