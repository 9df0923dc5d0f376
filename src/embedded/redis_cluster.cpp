// The embedded cluster's creation, and what it reports of itself: ports, slot owners, health.
// redis_cluster_faults.cpp kills and pauses nodes and waits for failovers;
// redis_cluster_migration.cpp moves slots.
#include "embedded/redis_cluster.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "cluster_nodes.hpp"
#include "embedded/process.hpp"
#include "embedded/resp_client.hpp"
#include "poller.hpp"

namespace dlock::embedded {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

constexpr std::uint16_t slot_count = 16384;
// The cluster bus listens on port + 10000 unless cluster-port says otherwise, and older
// servers have no cluster-port: keep to the rule every version follows.
constexpr std::uint16_t bus_offset = 10000;

std::uint16_t as_port(const resp_value& v) {
  return static_cast<std::uint16_t>(v.type == resp_value::kind::integer ? v.integer
                                                                        : std::stol(v.text));
}

// Who replicates whom, as one node sees it, leaving out nodes it considers failed.
std::map<std::string, std::string> replication_links(const std::string& cluster_nodes) {
  std::map<std::string, std::string> links;
  for (const auto& n : parse_cluster_nodes(cluster_nodes)) {
    if (n.flags.find("fail") == std::string::npos) links[n.id] = n.master_id;
  }
  return links;
}

}  // namespace

bool cluster_available() {
  return server_available(default_programs().server) && server_available(default_programs().cli);
}

redis_cluster::redis_cluster(cluster_options options) : options_(std::move(options)) {
  if (options_.masters < 3 || options_.replicas_per_master < 0) {
    throw server_error("redis_cluster: redis-cli creates clusters of 3 masters or more");
  }
  if (!server_available(default_programs().cli)) {
    throw server_error(default_programs().cli + " not found; install it (Debian: apt-get install " +
                       default_programs().family + "-tools)");
  }
  server_options o;
  o.max_port = 65535 - bus_offset;
  o.bus_port_offset = bus_offset;
  o.extra_args = {"--cluster-enabled", "yes", "--cluster-node-timeout",
                  std::to_string(options_.node_timeout.count()),
                  // relative to --dir: each node's own directory
                  "--cluster-config-file", "nodes.conf", "--appendonly", "no", "--save", "",
                  "--repl-diskless-sync-delay", "0",
                  // Fail over however long ago the replica last heard from its master: on a
                  // loaded test machine its data age is no reason to leave the slots unserved.
                  "--cluster-replica-validity-factor", "0"};
  o.extra_args.insert(o.extra_args.end(), options_.extra_args.begin(), options_.extra_args.end());
  if (options_.announce_port) {
    o.config = [this](std::uint16_t port) {
      const auto announced = options_.announce_port(port);
      advertised_[port] = announced;
      return "cluster-announce-ip 127.0.0.1\ncluster-announce-port " + std::to_string(announced) +
             "\ncluster-announce-bus-port " + std::to_string(port + bus_offset) + "\n";
    };
  }
  const int total = options_.masters * (1 + options_.replicas_per_master);
  for (int i = 0; i < total; ++i) {
    nodes_.push_back(std::make_unique<redis_server>(o));
    ids_.push_back(resp_client(nodes_.back()->port()).checked({"CLUSTER", "MYID"}).text);
  }
  create();
  wait_healthy(options_.start_timeout);
}

redis_cluster::~redis_cluster() {
  // SIGKILL rather than a shutdown: nothing here is worth saving, and a master shutting down
  // would wait for its replicas while the others start failing it over.
  for (auto& n : nodes_)
    n->kill();
}

void redis_cluster::create() {
  std::vector<std::string> args = {default_programs().cli, "--cluster", "create"};
  for (const auto& n : nodes_)
    args.push_back("127.0.0.1:" + std::to_string(n->port()));
  args.insert(args.end(), {"--cluster-replicas", std::to_string(options_.replicas_per_master),
                           "--cluster-yes"});
  child_process cli(args, {.capture_stdout = true, .merge_stderr = true});
  const auto deadline = clock::now() + options_.start_timeout;
  std::string output;
  while (auto line = cli.read_line(std::chrono::duration_cast<std::chrono::milliseconds>(
             std::max(deadline - clock::now(), clock::duration::zero())))) {
    output += *line + "\n";
  }
  // EOF normally; at the deadline redis-cli is still waiting for the nodes to join.
  const int status = cli.wait(clock::now() < deadline ? 5000ms : 0ms);
  if (status != 0) {
    throw server_error(default_programs().cli + " --cluster create failed (status " +
                       std::to_string(status) + "):\n" + output + describe());
  }
}

std::uint16_t redis_cluster::advertised_port(std::size_t i) const {
  const auto port = nodes_.at(i)->port();
  const auto it = advertised_.find(port);
  return it == advertised_.end() ? port : it->second;
}

std::vector<std::string> redis_cluster::seed_urls() const {
  std::vector<std::string> urls;
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    urls.push_back("redis://127.0.0.1:" + std::to_string(advertised_port(i)));
  return urls;
}

// Ports as the cluster reports them (CLUSTER SLOTS, CLUSTER NODES, ROLE): advertised ones.
std::size_t redis_cluster::index_of_port(std::uint16_t port) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (advertised_port(i) == port) return i;
  }
  throw server_error("port " + std::to_string(port) + " is not a node of this cluster");
}

redis_cluster::slot_map redis_cluster::slots_of(std::size_t i) {
  const auto reply = resp_client(node(i).port()).checked({"CLUSTER", "SLOTS"});
  slot_map map;
  for (const auto& r : reply.elements) {
    if (r.elements.size() < 3 || r.elements[2].elements.size() < 2) {
      throw server_error("unexpected CLUSTER SLOTS entry: " + r.to_string());
    }
    slot_range range;
    range.first = static_cast<std::uint16_t>(r.elements[0].integer);
    range.last = static_cast<std::uint16_t>(r.elements[1].integer);
    range.master_port = as_port(r.elements[2].elements[1]);
    for (std::size_t k = 3; k < r.elements.size(); ++k) {
      if (r.elements[k].elements.size() >= 2) {
        range.replica_ports.push_back(as_port(r.elements[k].elements[1]));
      }
    }
    map.push_back(std::move(range));
  }
  std::sort(map.begin(), map.end(),
            [](const slot_range& a, const slot_range& b) { return a.first < b.first; });
  return map;
}

redis_cluster::slot_map redis_cluster::any_slots() {
  std::string why = "no node is running";
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i]->answering()) continue;
    try {
      return slots_of(i);
    } catch (const server_error& e) {
      why = e.what();
    }
  }
  throw server_error("no cluster node answers CLUSTER SLOTS: " + why);
}

std::vector<std::size_t> redis_cluster::master_indexes() {
  std::set<std::size_t> masters;
  for (const auto& r : any_slots())
    masters.insert(index_of_port(r.master_port));
  return {masters.begin(), masters.end()};
}

std::size_t redis_cluster::master_of_slot(std::uint16_t slot) {
  for (const auto& r : any_slots()) {
    if (r.first <= slot && slot <= r.last) return index_of_port(r.master_port);
  }
  throw server_error("slot " + std::to_string(slot) + " is not assigned");
}

std::uint16_t redis_cluster::key_slot(std::string_view key) {
  // Only the part between the first '{' and the first '}' after it is hashed, if not empty.
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close != open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  std::uint16_t crc = 0;  // CRC16-CCITT, XMODEM variant: polynomial 0x1021, initial value 0
  for (const char c : key) {
    crc ^= static_cast<std::uint16_t>(static_cast<unsigned char>(c) << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<std::uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
  }
  return crc % slot_count;
}

std::string redis_cluster::health_problem() {
  slot_map reference;
  std::map<std::string, std::string> reference_links;
  std::size_t reference_node = nodes_.size();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i]->answering()) continue;
    const std::string who =
        "node " + std::to_string(i) + " (port " + std::to_string(nodes_[i]->port()) + "): ";
    try {
      resp_client c(nodes_[i]->port());
      const auto info = c.checked({"CLUSTER", "INFO"}).text;
      if (const auto s = info_field(info, "cluster_state"); s != "ok") {
        return who + "cluster_state:" + s;
      }
      if (const auto s = info_field(info, "cluster_slots_assigned"); s != "16384") {
        return who + "cluster_slots_assigned:" + s;
      }
      if (const auto s = info_field(info, "cluster_known_nodes"); s != std::to_string(size())) {
        return who + "cluster_known_nodes:" + s;
      }
      const auto replication = c.checked({"INFO", "replication"}).text;
      if (info_field(replication, "role") == "slave" &&
          info_field(replication, "master_link_status") != "up") {
        return who + "master_link_status:" + info_field(replication, "master_link_status");
      }
      auto map = slots_of(i);
      // A master learns that a node replicates it from gossip, after the replica's link is up;
      // until every node agrees, a failover test could ask a master that knows no replica.
      auto links = replication_links(c.checked({"CLUSTER", "NODES"}).text);
      if (reference_node == nodes_.size()) {
        reference = std::move(map);
        reference_links = std::move(links);
        reference_node = i;
      } else if (map != reference) {
        return who + "disagrees with node " + std::to_string(reference_node) + " on slot owners";
      } else if (links != reference_links) {
        return who + "disagrees with node " + std::to_string(reference_node) +
               " on who replicates whom";
      }
    } catch (const server_error& e) {
      return who + e.what();
    }
  }
  if (reference_node == nodes_.size()) return "no node is running";
  std::size_t covered = 0;
  for (const auto& r : reference) {
    covered += r.last - r.first + 1u;
    const auto owner = index_of_port(r.master_port);
    if (!nodes_[owner]->answering()) {
      return "slots " + std::to_string(r.first) + "-" + std::to_string(r.last) +
             " are served by node " + std::to_string(owner) + ", which is not running";
    }
  }
  if (covered != slot_count) return "CLUSTER SLOTS covers " + std::to_string(covered) + " slots";
  return {};
}

void redis_cluster::wait_healthy(std::chrono::milliseconds timeout) {
  poller p(timeout);
  std::string problem;
  do {
    problem = health_problem();
    if (problem.empty()) return;
  } while (p.again());
  throw server_error("the cluster is not healthy after " + ms(timeout) + ": " + problem + "\n" +
                     describe());
}

std::string redis_cluster::describe() {
  std::string out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i]->answering()) continue;
    try {
      out += "CLUSTER NODES from node " + std::to_string(i) + ":\n" +
             resp_client(nodes_[i]->port(), {}, 1s).checked({"CLUSTER", "NODES"}).text;
      break;
    } catch (const server_error&) {
    }
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    out += "--- node " + std::to_string(i) + " (port " + std::to_string(nodes_[i]->port()) +
           (nodes_[i]->running() ? ", pid " + std::to_string(nodes_[i]->pid()) +
                                       (nodes_[i]->answering() ? "" : ", paused")
                                 : ", not running") +
           "), log tail:\n" + nodes_[i]->log_tail(8);
  }
  return out;
}

}  // namespace dlock::embedded
