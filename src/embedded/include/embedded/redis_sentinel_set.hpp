// A private Sentinel deployment of real processes for tests: one master, its replicas and a set of
// sentinels monitoring it, each on a free loopback port in its own temporary directory (the
// sentinels keep their rewritable configuration there), stopped by PID when the object goes, or
// by the kernel if this process dies first. Data node indexes are fixed for the set's life; which
// one is the master is always asked of the sentinels, since failovers change it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "embedded/redis_server.hpp"

namespace dlock::embedded {

struct sentinel_set_options {
  int replicas = 1;
  int sentinels = 3;
  std::string master_name = "mymaster";
  /// sentinel down-after-milliseconds: how long a silent master takes to be failed over.
  std::chrono::milliseconds down_after{1000};
  std::chrono::milliseconds failover_timeout{3000};
  /// Appended to every data node's command line.
  std::vector<std::string> server_args{};
  /// If set, the sentinels require it (requirepass in their configuration).
  std::string sentinel_password{};
  /// If set, the data nodes require it (requirepass, masterauth) and the sentinels use it.
  std::string master_password{};
  /// How long the constructor waits for replication and for the sentinels to know each other.
  std::chrono::milliseconds start_timeout{60000};
  /// If set, called with each data node's port once it is chosen; the node is then known to
  /// everyone else (sentinels, replicas, clients) by the port returned, a proxy in front of it
  /// for instance: it announces that port (replica-announce-port), replicas and sentinels are
  /// pointed there.
  std::function<std::uint16_t(std::uint16_t port)> announce_port{};
};

/// True if a sentinel can be run: `redis-sentinel`, or `redis-server --sentinel`.
bool sentinel_available();

class redis_sentinel_set {
 public:
  /// Starts the master and the replicas, waits for them to sync, starts the sentinels and waits
  /// until each knows the master, every replica and every other sentinel, so that a failover can
  /// happen. Throws `server_error` with log tails if that does not happen in time.
  explicit redis_sentinel_set(sentinel_set_options options = {});
  /// Kills the sentinels first (so that they fail nothing over), then the data nodes, and removes
  /// their directories. Never throws.
  ~redis_sentinel_set();
  redis_sentinel_set(const redis_sentinel_set&) = delete;
  redis_sentinel_set& operator=(const redis_sentinel_set&) = delete;

  /// redis-sentinel://[:password@]127.0.0.1:S1,127.0.0.1:S2,...#name
  std::string url() const;
  /// redis://127.0.0.1:S of every sentinel.
  std::vector<std::string> sentinel_urls() const;
  const std::string& master_name() const noexcept { return options_.master_name; }
  /// The master and the replicas.
  std::size_t data_nodes() const noexcept { return data_.size(); }
  /// Data node `i`; 0 is the initial master.
  redis_server& data_node(std::size_t i) { return *data_.at(i); }
  /// The port everyone else reaches data node `i` at: its own, or the one `announce_port` gave.
  std::uint16_t advertised_port(std::size_t i) const;
  std::size_t sentinels() const noexcept { return sentinels_.size(); }
  redis_server& sentinel(std::size_t i) { return *sentinels_.at(i); }

  /// The index of the data node the running sentinels name as master (SENTINEL
  /// GET-MASTER-ADDR-BY-NAME; the most common answer). Throws `server_error` if none answers.
  std::size_t master_index();
  /// Waits until every running sentinel names the same master other than `old_master` and that
  /// node's ROLE says master; returns its index. Throws `server_error` on timeout.
  std::size_t wait_failover(std::size_t old_master, std::chrono::milliseconds timeout);
  /// Waits until every running sentinel names the same master and flags it `master` alone (no
  /// s_down, o_down or failover under way), and that node's ROLE says master: a failover the
  /// sentinels started is over. Throws `server_error` on timeout.
  void wait_settled(std::chrono::milliseconds timeout);
  /// Waits until every running data node but the current master reports master_link_status:up
  /// to it. Throws `server_error` on timeout.
  void wait_replicas_synced(std::chrono::milliseconds timeout);

 private:
  std::string sentinel_config(std::uint16_t port) const;
  void wait_synced_to(std::size_t master, std::chrono::milliseconds timeout);
  void wait_sentinels_ready(std::chrono::milliseconds timeout);
  std::vector<std::uint16_t> masters_named();
  std::size_t index_of_port(std::uint16_t port) const;
  std::string describe();

  sentinel_set_options options_;
  std::map<std::uint16_t, std::uint16_t> advertised_;  // a data node's port -> announce_port's
  // Declared before the sentinels, so destroyed after them.
  std::vector<std::unique_ptr<redis_server>> data_;
  std::vector<std::unique_ptr<redis_server>> sentinels_;
};

}  // namespace dlock::embedded
