#include "topology/cluster.hpp"

#include <numeric>

#include "dlock/error.hpp"
#include "net/redis_client_impl.hpp"

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

struct cluster_topology::node {
  node_address address;
  std::unique_ptr<redis_client> client;
  redis_client::impl* impl = nullptr;
  bool displaced_handler_set = false;  // I/O thread only
};

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

// ---- the slot map ----

void cluster_topology::refresh_later() {
  if (closed_) return;
  if (refreshing_) {
    refresh_wanted_ = true;
    return;
  }
  refresh_map();
}

void cluster_topology::refresh_map() {
  refreshing_ = true;
  refresh_wanted_ = false;
  // Ask a node that is up, masters first; when none is, the next failed attempt asks again.
  std::vector<std::shared_ptr<node>> candidates;
  {
    lock_guard lock(nodes_mutex_);
    candidates = nodes_;
  }
  std::shared_ptr<node> asked;
  for (const auto& n : candidates) {
    if (n->impl->commands->up()) {
      asked = n;
      break;
    }
  }
  if (!asked) {
    refreshing_ = false;
    // Nobody to ask now; try again shortly, backing off while the cluster stays unreachable.
    refresh_backoff_ = std::clamp(refresh_backoff_ * 2, std::chrono::milliseconds(50),
                                  std::chrono::milliseconds(1000));
    refresh_timer_.expires_after(refresh_backoff_);
    refresh_timer_.async_wait([this](std::error_code ec) {
      if (!ec && !closed_ && !refreshing_) refresh_map();
    });
    return;
  }
  const std::string_view args[] = {"CLUSTER", "SLOTS"};
  const auto deadline = net::clock::now() + node_options_.command_timeout;
  asked->impl->commands->submit(args, deadline, [this, asked](std::error_code ec, reply r) {
    refreshing_ = false;
    if (closed_) return;
    std::optional<slot_ranges> map;
    if (!ec) map = parse_cluster_slots(r, asked->address.host);
    if (map && !map->ranges.empty()) {
      counters_.map_refreshes.fetch_add(1, std::memory_order_relaxed);
      refresh_backoff_ = std::chrono::milliseconds(0);
      apply(*map);
    } else {
      refresh_wanted_ = true;  // ask again, perhaps another node
    }
    if (refresh_wanted_) {
      // Not at once: a MOVED storm during a migration would otherwise fetch the map per reply.
      refresh_timer_.expires_after(std::chrono::milliseconds(50));
      refresh_timer_.async_wait([this](std::error_code timer_ec) {
        if (!timer_ec && !closed_ && !refreshing_) refresh_map();
      });
    }
  });
}

void cluster_topology::apply(const slot_ranges& map) {
  std::vector<bool> owns;
  for (const auto& range : map.ranges) {
    const node_id id = node_for(range.master);
    if (owns.size() <= id) owns.resize(id + 1, false);
    owns[id] = true;
    for (std::uint32_t slot = range.first; slot <= range.last; ++slot)
      owner_[slot].store(id, std::memory_order_relaxed);
  }
  rehome_subscriptions();
  // Commands waiting for a node that is down and owns nothing any more (a failed-over master)
  // go to the new owner now rather than failing at their deadlines (on_reply resends them).
  std::vector<std::shared_ptr<node>> all;
  {
    lock_guard lock(nodes_mutex_);
    all = nodes_;
  }
  for (node_id id = 0; id < all.size(); ++id) {
    if ((id >= owns.size() || !owns[id]) && !all[id]->impl->commands->up()) {
      all[id]->impl->commands->fail_unsent(errc::connect_failed);
    }
  }
}

// ---- sharded subscriptions ----

void cluster_topology::place(subscription_record& s) {
  s.where = owner_[key_slot(s.channel)].load(std::memory_order_relaxed);
  auto n = node_at(s.where);
  auto& sub = n->impl->subscriber();
  if (!std::exchange(n->displaced_handler_set, true)) {
    // The server dropped or refused a sharded subscription: its slot moved. Fetch the map;
    // applying it moves every subscription whose slot changed owner.
    sub.set_displaced_handler([this](const std::string&) { refresh_later(); });
  }
  s.inner = sub.add(net::subscriber::kind::shard_channel, s.channel, s.on_message, s.on_subscribed);
}

std::uint64_t cluster_topology::subscribe(node_id, const std::string& channel,
                                          message_handler on_message,
                                          std::function<void()> on_subscribed) {
  const auto id = next_subscription_++;
  auto& s = subscriptions_[id];
  s.channel = channel;
  s.on_message = std::move(on_message);
  s.on_subscribed = std::move(on_subscribed);
  place(s);
  return id;
}

void cluster_topology::unsubscribe(std::uint64_t id) {
  auto it = subscriptions_.find(id);
  if (it == subscriptions_.end()) return;
  node_at(it->second.where)->impl->subscriber().remove(it->second.inner);
  subscriptions_.erase(it);
}

void cluster_topology::rehome_subscriptions() {
  for (auto& [id, s] : subscriptions_) {
    if (owner_[key_slot(s.channel)].load(std::memory_order_relaxed) == s.where) continue;
    node_at(s.where)->impl->subscriber().remove(s.inner);
    place(s);
  }
}

// ---- the rest ----

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
