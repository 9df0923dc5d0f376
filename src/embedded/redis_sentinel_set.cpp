#include "embedded/redis_sentinel_set.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "embedded/resp_client.hpp"
#include "poller.hpp"

namespace dlock::embedded {
namespace {

using namespace std::chrono_literals;

// SENTINEL MASTER answers a flat array of names and values.
std::string field(const resp_value& flat, const std::string& name) {
  for (std::size_t i = 0; i + 1 < flat.elements.size(); i += 2) {
    if (flat.elements[i].text == name) return flat.elements[i + 1].text;
  }
  return {};
}

// Userinfo in a URL: everything but the unreserved characters percent-encoded.
std::string url_escape(const std::string& text) {
  static const char hex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// A configuration value as one argument, whatever it holds: double-quoted, with escapes.
std::string conf_quote(const std::string& text) {
  static const char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (std::isprint(c)) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out + '"';
}

}  // namespace

bool sentinel_available() {
  return server_available(default_programs().sentinel) ||
         server_available(default_programs().server);
}

redis_sentinel_set::redis_sentinel_set(sentinel_set_options options)
    : options_(std::move(options)) {
  if (options_.replicas < 0 || options_.sentinels < 1) {
    throw server_error("redis_sentinel_set: needs replicas >= 0 and sentinels >= 1");
  }
  const auto& pw = options_.master_password;
  for (int i = 0; i <= options_.replicas; ++i) {
    server_options o;
    o.extra_args = {"--repl-diskless-sync-delay", "0"};
    if (!pw.empty())
      o.extra_args.insert(o.extra_args.end(), {"--requirepass", pw, "--masterauth", pw});
    if (i > 0) {
      o.extra_args.insert(o.extra_args.end(),
                          {"--replicaof", "127.0.0.1", std::to_string(advertised_port(0))});
    }
    if (options_.announce_port) {
      o.config = [this](std::uint16_t port) {
        const auto announced = options_.announce_port(port);
        advertised_[port] = announced;
        return "replica-announce-ip 127.0.0.1\nreplica-announce-port " + std::to_string(announced) +
               "\n";
      };
    }
    o.extra_args.insert(o.extra_args.end(), options_.server_args.begin(),
                        options_.server_args.end());
    data_.push_back(std::make_unique<redis_server>(std::move(o)));
  }
  // Sentinels learn of replicas from the master's INFO, which they ask for on connecting and
  // then only every ten seconds: they start once the replicas are there to be seen.
  wait_synced_to(0, options_.start_timeout);
  server_options s;
  // Debian ships the sentinel as its own program; the server with --sentinel is the same code.
  const auto& programs = default_programs();
  s.executable = server_available(programs.sentinel) ? programs.sentinel : programs.server;
  s.extra_args = {"--sentinel"};
  s.config = [this](std::uint16_t port) { return sentinel_config(port); };
  for (int i = 0; i < options_.sentinels; ++i)
    sentinels_.push_back(std::make_unique<redis_server>(s));
  wait_sentinels_ready(options_.start_timeout);
}

redis_sentinel_set::~redis_sentinel_set() {
  // Sentinels first, so that the data nodes going away starts no failover; SIGKILL rather than a
  // shutdown since nothing here is worth saving and a master would wait for its replicas.
  for (auto& s : sentinels_)
    s->kill();
  for (auto& d : data_)
    d->kill();
}

std::uint16_t redis_sentinel_set::advertised_port(std::size_t i) const {
  const auto port = data_.at(i)->port();
  const auto it = advertised_.find(port);
  return it == advertised_.end() ? port : it->second;
}

std::string redis_sentinel_set::sentinel_config(std::uint16_t port) const {
  const auto& name = options_.master_name;
  // A majority of three or more: one sentinel alone cannot call the master down.
  const int quorum = options_.sentinels >= 3 ? options_.sentinels / 2 + 1 : 1;
  const auto line = [&](const std::string& directive, const std::string& value) {
    return "sentinel " + directive + " " + name + " " + value + "\n";
  };
  std::string conf = "port " + std::to_string(port) + "\n";
  conf += "bind 127.0.0.1\n";
  conf += "sentinel resolve-hostnames no\n";
  conf += line("monitor",
               "127.0.0.1 " + std::to_string(advertised_port(0)) + " " + std::to_string(quorum));
  conf += line("down-after-milliseconds", std::to_string(options_.down_after.count()));
  conf += line("failover-timeout", std::to_string(options_.failover_timeout.count()));
  conf += line("parallel-syncs", "1");
  if (!options_.master_password.empty()) {
    conf += line("auth-pass", conf_quote(options_.master_password));
  }
  // Sentinels also present this password to each other.
  if (!options_.sentinel_password.empty())
    conf += "requirepass " + conf_quote(options_.sentinel_password) + "\n";
  return conf;
}

std::string redis_sentinel_set::url() const {
  std::string url = "redis-sentinel://";
  if (!options_.sentinel_password.empty())
    url += ":" + url_escape(options_.sentinel_password) + "@";
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    if (i) url += ",";
    url += "127.0.0.1:" + std::to_string(sentinels_[i]->port());
  }
  return url + "#" + options_.master_name;
}

std::vector<std::string> redis_sentinel_set::sentinel_urls() const {
  std::vector<std::string> urls;
  for (const auto& s : sentinels_)
    urls.push_back(s->url());
  return urls;
}

std::size_t redis_sentinel_set::index_of_port(std::uint16_t port) const {
  for (std::size_t i = 0; i < data_.size(); ++i) {
    if (advertised_port(i) == port) return i;
  }
  throw server_error("the sentinels name port " + std::to_string(port) +
                     ", which is not a data node of this set");
}

std::vector<std::uint16_t> redis_sentinel_set::masters_named() {
  std::vector<std::uint16_t> ports;
  for (const auto& s : sentinels_) {
    if (!s->running()) continue;
    try {
      const auto addr = resp_client(s->port(), options_.sentinel_password)
                            .checked({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
      if (addr.elements.size() == 2) {
        ports.push_back(static_cast<std::uint16_t>(std::stoul(addr.elements[1].text)));
      }
    } catch (const server_error&) {
      // a sentinel that does not answer names nothing
    }
  }
  return ports;
}

std::size_t redis_sentinel_set::master_index() {
  std::map<std::uint16_t, int> votes;
  for (const auto port : masters_named())
    ++votes[port];
  if (votes.empty()) throw server_error("no sentinel names a master\n" + describe());
  const auto best = std::max_element(
      votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  return index_of_port(best->first);
}

std::size_t redis_sentinel_set::wait_failover(std::size_t old_master,
                                              std::chrono::milliseconds timeout) {
  const auto old_port = advertised_port(old_master);
  poller p(timeout);
  std::string state;
  do {
    const auto named = masters_named();
    const auto running = static_cast<std::size_t>(std::count_if(
        sentinels_.begin(), sentinels_.end(), [](const auto& s) { return s->running(); }));
    state = std::to_string(named.size()) + " of " + std::to_string(running) +
            " running sentinels answered";
    if (named.empty() || named.size() != running) continue;
    if (std::adjacent_find(named.begin(), named.end(), std::not_equal_to<>()) != named.end()) {
      state = "the sentinels disagree on the master";
      continue;
    }
    if (named.front() == old_port) {
      state = "the sentinels still name the old master";
      continue;
    }
    const auto index = index_of_port(named.front());
    try {
      const auto role =
          resp_client(data_node(index).port(), options_.master_password).checked({"ROLE"});
      if (!role.elements.empty() && role.elements[0].text == "master") return index;
      state = "data node " + std::to_string(index) + " is named but is not a master yet";
    } catch (const server_error& e) {
      state = e.what();
    }
  } while (p.again());
  throw server_error("no failover from data node " + std::to_string(old_master) + " within " +
                     ms(timeout) + ": " + state + "\n" + describe());
}

void redis_sentinel_set::wait_settled(std::chrono::milliseconds timeout) {
  poller p(timeout);
  std::string state;
  do {
    std::set<std::string> masters;
    state.clear();
    for (std::size_t i = 0; i < sentinels_.size() && state.empty(); ++i) {
      if (!sentinels_[i]->running()) continue;
      try {
        const auto m = resp_client(sentinels_[i]->port(), options_.sentinel_password)
                           .checked({"SENTINEL", "MASTER", options_.master_name});
        if (field(m, "flags") != "master") {
          state = "sentinel " + std::to_string(i) + ": master flags " + field(m, "flags");
        }
        masters.insert(field(m, "port"));
      } catch (const server_error& e) {
        state = "sentinel " + std::to_string(i) + ": " + e.what();
      }
    }
    if (state.empty() && masters.size() != 1) state = "the sentinels disagree on the master";
    if (!state.empty()) continue;
    try {
      const auto index = index_of_port(static_cast<std::uint16_t>(std::stoul(*masters.begin())));
      const auto role =
          resp_client(data_node(index).port(), options_.master_password).checked({"ROLE"});
      if (!role.elements.empty() && role.elements[0].text == "master") return;
      state = "data node " + std::to_string(index) + " is named but is not a master";
    } catch (const server_error& e) {
      state = e.what();
    }
  } while (p.again());
  throw server_error("the sentinels did not settle within " + ms(timeout) + ": " + state + "\n" +
                     describe());
}

void redis_sentinel_set::wait_replicas_synced(std::chrono::milliseconds timeout) {
  wait_synced_to(master_index(), timeout);
}

void redis_sentinel_set::wait_synced_to(std::size_t master, std::chrono::milliseconds timeout) {
  const auto master_port = std::to_string(advertised_port(master));
  poller p(timeout);
  std::string problem;
  do {
    problem.clear();
    for (std::size_t i = 0; i < data_.size() && problem.empty(); ++i) {
      if (i == master || !data_[i]->running()) continue;
      const auto who = "data node " + std::to_string(i) + ": ";
      try {
        const auto info = resp_client(data_[i]->port(), options_.master_password)
                              .checked({"INFO", "replication"})
                              .text;
        if (info_field(info, "role") != "slave" || info_field(info, "master_port") != master_port ||
            info_field(info, "master_link_status") != "up") {
          problem = who + "role:" + info_field(info, "role") +
                    " master_port:" + info_field(info, "master_port") +
                    " master_link_status:" + info_field(info, "master_link_status");
        }
      } catch (const server_error& e) {
        problem = who + e.what();
      }
    }
    if (problem.empty()) return;
  } while (p.again());
  throw server_error("the replicas of data node " + std::to_string(master) +
                     " did not sync within " + ms(timeout) + ": " + problem + "\n" + describe());
}

void redis_sentinel_set::wait_sentinels_ready(std::chrono::milliseconds timeout) {
  const auto& name = options_.master_name;
  const auto replicas = static_cast<std::size_t>(options_.replicas);
  const auto others = sentinels_.size() - 1;
  // Flags that say an instance is healthy, with nothing like s_down or disconnected added.
  auto all_flagged = [](const resp_value& list, const std::string& flags) {
    return std::all_of(list.elements.begin(), list.elements.end(),
                       [&](const resp_value& e) { return field(e, "flags") == flags; });
  };
  poller p(timeout);
  std::string problem;
  do {
    problem.clear();
    for (std::size_t i = 0; i < sentinels_.size() && problem.empty(); ++i) {
      const auto who = "sentinel " + std::to_string(i) + ": ";
      try {
        resp_client c(sentinels_[i]->port(), options_.sentinel_password);
        const auto master = c.checked({"SENTINEL", "MASTER", name});
        const auto known_replicas = c.checked({"SENTINEL", "REPLICAS", name});
        const auto known_sentinels = c.checked({"SENTINEL", "SENTINELS", name});
        if (field(master, "flags") != "master") {
          problem = who + "master flags " + field(master, "flags");
        } else if (known_replicas.elements.size() != replicas ||
                   !all_flagged(known_replicas, "slave")) {
          problem = who + "replicas " + known_replicas.to_string();
        } else if (known_sentinels.elements.size() != others ||
                   !all_flagged(known_sentinels, "sentinel")) {
          problem = who + "knows " + std::to_string(known_sentinels.elements.size()) + " of " +
                    std::to_string(others) + " other sentinels";
        } else if (const auto q = c({"SENTINEL", "CKQUORUM", name}); q.is_error()) {
          problem = who + q.text;
        }
      } catch (const server_error& e) {
        problem = who + e.what();
      }
    }
    if (problem.empty()) return;
  } while (p.again());
  throw server_error("the sentinels are not ready after " + ms(timeout) + ": " + problem + "\n" +
                     describe());
}

std::string redis_sentinel_set::describe() {
  std::string out;
  auto tail = [&](const char* what, std::size_t i, redis_server& s) {
    out += std::string("--- ") + what + " " + std::to_string(i) + " (port " +
           std::to_string(s.port()) +
           (s.running() ? ", pid " + std::to_string(s.pid()) : ", not running") + "), log tail:\n" +
           s.log_tail(8);
  };
  for (std::size_t i = 0; i < data_.size(); ++i)
    tail("data node", i, *data_[i]);
  for (std::size_t i = 0; i < sentinels_.size(); ++i)
    tail("sentinel", i, *sentinels_[i]);
  return out;
}

}  // namespace dlock::embedded
