#include "deployments.hpp"

#include <stdexcept>

namespace dlock::testing {
namespace {

class standalone final : public deployment {
 public:
  client_options options() const override { return client_options::from_url(server_.url()); }
  std::string worker_target() const override { return server_.url(); }
  std::vector<std::string> cli_target() const override { return {"--url", server_.url()}; }
  std::uint16_t port_for(std::string_view) override { return server_.port(); }
  std::vector<std::uint16_t> master_ports() override { return {server_.port()}; }

 private:
  embedded::redis_server server_;
};

class sentinel final : public deployment {
 public:
  explicit sentinel(int replicas) : set_(make_options(replicas)) {}
  client_options options() const override { return client_options::from_url(set_.url()); }
  std::string worker_target() const override { return set_.url(); }
  std::vector<std::string> cli_target() const override {
    std::vector<std::string> args = {"--sentinel", set_.master_name()};
    for (const auto& url : set_.sentinel_urls()) {
      args.push_back("--url");
      args.push_back(url);
    }
    return args;
  }
  std::uint16_t port_for(std::string_view) override {
    return set_.data_node(set_.master_index()).port();
  }
  std::vector<std::uint16_t> master_ports() override {
    return {set_.data_node(set_.master_index()).port()};
  }
  embedded::redis_sentinel_set& set() { return set_; }

 private:
  static embedded::sentinel_set_options make_options(int replicas) {
    embedded::sentinel_set_options o;
    o.replicas = std::max(replicas, 1);
    return o;
  }
  embedded::redis_sentinel_set set_;
};

class cluster final : public deployment {
 public:
  explicit cluster(int replicas) : cluster_(make_options(replicas)) {}
  client_options options() const override { return client_options::cluster(cluster_.seed_urls()); }
  std::string worker_target() const override {
    std::string target = "cluster:";
    for (const auto& url : cluster_.seed_urls()) {
      if (target.size() > 8) target += ',';
      target += url;
    }
    return target;
  }
  std::vector<std::string> cli_target() const override {
    std::vector<std::string> args = {"--cluster"};
    for (const auto& url : cluster_.seed_urls()) {
      args.push_back("--url");
      args.push_back(url);
    }
    return args;
  }
  std::uint16_t port_for(std::string_view key) override {
    return cluster_.node(cluster_.master_of_slot(embedded::redis_cluster::key_slot(key))).port();
  }
  std::vector<std::uint16_t> master_ports() override {
    std::vector<std::uint16_t> ports;
    for (const auto i : cluster_.master_indexes())
      ports.push_back(cluster_.node(i).port());
    return ports;
  }
  std::string numsub() const override { return "SHARDNUMSUB"; }

 private:
  static embedded::cluster_options make_options(int replicas) {
    embedded::cluster_options o;
    o.replicas_per_master = replicas;
    return o;
  }
  embedded::redis_cluster cluster_;
};

}  // namespace

std::unique_ptr<deployment> start_deployment(const std::string& kind, int replicas) {
  if (kind == "standalone") return std::make_unique<standalone>();
  if (kind == "sentinel") return std::make_unique<sentinel>(replicas);
  if (kind == "cluster") return std::make_unique<cluster>(replicas);
  throw std::invalid_argument("unknown deployment " + kind);
}

}  // namespace dlock::testing
