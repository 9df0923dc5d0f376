// The cluster topology's nodes and its routing: a call goes to the owner of its key's slot and
// follows the redirects and retries the cluster answers with. cluster_slot_map.cpp keeps the
// slot map, and the sharded subscriptions that follow it.
#include "topology/cluster.hpp"

#include <numeric>

#include "dlock/error.hpp"
#include "topology/cluster_node.hpp"

namespace dlock::detail {
namespace {

// node_ids for nodes_for()'s spans: the span must outlive the call, so it points in here.
constexpr std::size_t max_nodes = 4096;
const std::array<node_id, max_nodes>& node_ids() {
  static const auto ids = [] {
    std::array<node_id, max_nodes> a{};
    std::iota(a.begin(), a.end(), node_id{0});
    return a;
  }();
  return ids;
}

constexpr int max_redirects = 16;

}  // namespace

// One script call or command, with its own copies of keys and arguments: a redirect resends it
// after the caller's spans are gone.
struct cluster_topology::call {
  std::optional<script> eval_script;  // empty: a plain command
  std::vector<std::string> keys;
  std::vector<std::string> args;  // a command's whole argument list
  std::uint16_t slot = 0;
  net::clock::time_point deadline;
  durability durable = durability::master;
  net::reply_callback done;
  int redirects = 0;
  int retries = 0;
  std::unique_ptr<asio::steady_timer> retry_timer;
};

cluster_topology::cluster_topology(const std::vector<connection_options>& seeds,
                                   std::shared_ptr<net::io_thread> io, write_ack ack)
    : io_(std::move(io)),
      node_options_(seeds.empty() ? connection_options{} : seeds.front()),
      ack_(ack),
      refresh_timer_(io_->context()) {
  if (seeds.empty()) throw error(errc::invalid_argument, "a cluster needs at least one seed URL");
  for (const auto& s : seeds) {
    if (s.database != 0) {
      throw error(errc::invalid_argument,
                  "a Redis Cluster has only database 0: " + s.redacted_url() + " names another");
    }
  }
  // The map is read from the first seed that answers, from this (the caller's) thread: a
  // failure here is the constructor's to report.
  try {
    std::string failures;
    std::optional<slot_ranges> map;
    for (const auto& seed : seeds) {
      std::unique_ptr<redis_client> probe;
      try {
        probe = redis_client_access::on_shared_io(seed, io_);
        const auto r = probe->command({"CLUSTER", "SLOTS"});
        map = parse_cluster_slots(r, seed.host);
        if (!map || map->ranges.empty()) {
          failures += (failures.empty() ? "" : "; ") + seed.redacted_url() + ": no slots assigned";
          map.reset();
        }
      } catch (const error& e) {
        if (std::string_view(e.what()).find("cluster support disabled") != std::string_view::npos) {
          release_on_io(std::move(probe));
          throw error(errc::invalid_argument,
                      seed.redacted_url() + " is not in cluster mode (cluster support disabled)");
        }
        failures += (failures.empty() ? "" : "; ") + seed.redacted_url() + ": " + e.what();
      }
      release_on_io(std::move(probe));
      if (map) break;
    }
    if (!map) throw error(errc::connect_failed, "no cluster seed gave a slot map: " + failures);
    io_->run([&] {
      for (const auto& seed : seeds)
        node_for({seed.host, seed.port});
      apply(*map);
    });
  } catch (...) {
    discard_nodes();
    throw;
  }
}

cluster_topology::~cluster_topology() {
  // Normally the client stopped the I/O thread first; a constructor that failed did not.
  if (io_->running()) discard_nodes();
}

void cluster_topology::release_on_io(std::unique_ptr<redis_client> c) {
  if (!c) return;
  auto& impl = redis_client_access::get(*c);
  io_->close_then_release(
      [&] {
        if (impl.subscriber_) impl.subscriber_->close();
        impl.commands->close(errc::client_closed);
      },
      [&] { c.reset(); });
}

void cluster_topology::discard_nodes() {
  io_->run([this] {
    closed_ = true;
    refresh_timer_.cancel();
  });
  std::vector<std::shared_ptr<node>> all;
  {
    lock_guard lock(nodes_mutex_);
    all.swap(nodes_);
  }
  for (auto& n : all)
    release_on_io(std::move(n->client));
}

std::shared_ptr<cluster_topology::node> cluster_topology::node_at(node_id id) const {
  lock_guard lock(nodes_mutex_);
  return nodes_.at(id);
}

node_id cluster_topology::node_for(const node_address& address) {
  {
    lock_guard lock(nodes_mutex_);
    for (node_id i = 0; i < nodes_.size(); ++i)
      if (nodes_[i]->address == address) return i;
    if (nodes_.size() >= max_nodes) throw error(errc::unexpected_reply, "too many cluster nodes");
  }
  auto n = std::make_shared<node>();
  n->address = address;
  // Connects in the background: this runs on the I/O thread, which the connection needs.
  n->client = redis_client_access::on_shared_io(
      at(node_options_, address), io_,
      {.require_master = false, .background = true, .on_first_attempt = {}});
  n->impl = &redis_client_access::get(*n->client);
  n->impl->set_attempt_failed_handler([this](std::error_code) { refresh_later(); });
  lock_guard lock(nodes_mutex_);
  nodes_.push_back(std::move(n));
  return static_cast<node_id>(nodes_.size() - 1);
}

std::span<const node_id> cluster_topology::nodes_for(std::string_view key) {
  const auto owner = owner_[key_slot(key)].load(std::memory_order_relaxed);
  return std::span<const node_id>(&node_ids()[owner], 1);
}

route cluster_topology::route_of(node_id node, std::string_view key) const {
  return {node, key_slot(key)};
}

void cluster_topology::eval(node_id, const script& s, std::span<const std::string_view> keys,
                            std::span<const std::string_view> args, net::clock::time_point deadline,
                            durability d, net::reply_callback done) {
  auto c = std::make_shared<call>();
  c->eval_script = s;
  c->keys.assign(keys.begin(), keys.end());
  c->args.assign(args.begin(), args.end());
  c->slot = keys.empty() ? 0 : key_slot(keys.front());
  c->deadline = deadline;
  c->durable = d;
  c->done = std::move(done);
  for (const auto k : keys) {
    if (key_slot(k) != c->slot) {
      // Redisson's rule leaves a name with '{' but no complete tag unwrapped, so its derived
      // keys hash elsewhere; no script can touch them together on a cluster.
      io_->post([c, key = std::string(k)] {
        c->done(errc::invalid_argument,
                reply::error("CROSSSLOT its keys fall in different cluster slots ('" + key +
                             "' among them): a name with '{' but no complete {tag} is used "
                             "unwrapped, as Redisson does; give it a complete {tag} or none"));
      });
      return;
    }
  }
  send(c, owner_[c->slot].load(std::memory_order_relaxed), false);
}

void cluster_topology::command(std::string_view key, std::span<const std::string_view> args,
                               net::clock::time_point deadline, net::reply_callback done) {
  auto c = std::make_shared<call>();
  c->args.assign(args.begin(), args.end());
  c->slot = key_slot(key);
  c->deadline = deadline;
  c->done = std::move(done);
  send(c, owner_[c->slot].load(std::memory_order_relaxed), false);
}

void cluster_topology::send(const std::shared_ptr<call>& c, node_id target, bool asking) {
  auto n = node_at(target);
  auto& connection = *n->impl->commands;
  auto reply_to = [this, c, target](std::error_code ec, reply r) {
    on_reply(c, target, ec, std::move(r));
  };
  std::vector<std::string_view> keys(c->keys.begin(), c->keys.end());
  std::vector<std::string_view> args(c->args.begin(), c->args.end());
  if (!c->eval_script) {
    connection.submit(args, c->deadline, std::move(reply_to), asking);
  } else {
    eval_on(connection, *c->eval_script, keys, args, c->deadline, c->durable, ack_,
            std::move(reply_to), asking);
  }
}

void cluster_topology::on_reply(const std::shared_ptr<call>& c, node_id from, std::error_code ec,
                                reply r) {
  if (closed_ || ec == errc::client_closed) {
    c->done(ec, std::move(r));
    return;
  }
  if (r.is_error()) {
    if (auto to = parse_redirect(r.str()); to && ++c->redirects <= max_redirects) {
      const node_id target = node_for(to->target);
      if (to->kind == redirect::type::moved) {
        counters_.moved.fetch_add(1, std::memory_order_relaxed);
        io_->report(
            {.what = net::notice::kind::slot_moved,
             .node =
                 std::string(to->target.host).append(":").append(std::to_string(to->target.port)),
             .key = c->keys.empty() ? std::string() : c->keys.front(),
             .detail = r.str()});
        owner_[to->slot].store(target, std::memory_order_relaxed);
        refresh_later();  // one slot moved: others probably did too
      } else {
        counters_.asked.fetch_add(1, std::memory_order_relaxed);
      }
      send(c, target, to->kind == redirect::type::ask);
      return;
    }
    if (cluster_retryable(r.str())) {
      const auto pause = std::chrono::milliseconds(std::min(10 << std::min(c->retries, 4), 100));
      if (net::clock::now() + pause < c->deadline) {
        ++c->retries;
        // A migrating slot whose keys are split answers ASK on the source and TRYAGAIN on the
        // target until the keys are together: that round is paced here and ends at the
        // deadline, so its redirects do not count against the limit meant for redirect loops.
        c->redirects = 0;
        if (r.str().starts_with("CLUSTERDOWN")) refresh_later();
        c->retry_timer = std::make_unique<asio::steady_timer>(io_->context(), pause);
        c->retry_timer->async_wait([this, c](std::error_code timer_ec) {
          if (timer_ec || closed_) {
            c->done(errc::client_closed, {});
            return;
          }
          send(c, owner_[c->slot].load(std::memory_order_relaxed), false);
        });
        return;
      }
    }
  }
  if (ec == errc::connect_failed) {
    // Never written (fail_unsent: its node is down and owns nothing now): the new owner may
    // take it, and if the slot has none yet, the caller hears a passing loss of connection.
    const auto owner = owner_[c->slot].load(std::memory_order_relaxed);
    if (owner != from && net::clock::now() < c->deadline) {
      send(c, owner, false);
      return;
    }
    ec = errc::connection_lost;
  }
  if (ec == errc::timeout || ec == errc::connection_lost) refresh_later();  // a failover?
  c->done(ec, std::move(r));
}

// ---- closing, and the masters ----

void cluster_topology::close(std::error_code reason) {
  closed_ = true;
  refresh_timer_.cancel();
  std::vector<std::shared_ptr<node>> all;
  {
    lock_guard lock(nodes_mutex_);
    all = nodes_;
  }
  for (const auto& n : all)
    n->impl->commands->close(reason);
}

redis_client& cluster_topology::redis() noexcept {
  auto n = node_at(owner_[0].load(std::memory_order_relaxed));
  return *n->client;
}

std::vector<redis_client*> cluster_topology::masters() {
  std::vector<bool> owns;
  for (const auto& o : owner_) {
    const auto id = o.load(std::memory_order_relaxed);
    if (owns.size() <= id) owns.resize(id + 1, false);
    owns[id] = true;
  }
  std::vector<redis_client*> out;
  for (node_id id = 0; id < owns.size(); ++id)
    if (owns[id]) out.push_back(node_at(id)->client.get());
  return out;
}

}  // namespace dlock::detail
