#include "net/subscriber.hpp"

#include "dlock/error.hpp"

namespace dlock::net {

subscriber::subscriber(io_thread& io, const connection_options& options,
                       std::shared_ptr<asio::ssl::context> tls, bool require_master)
    : io_(io), connection_(io, options, std::move(tls), connection::mode::pubsub) {
  if (require_master) connection_.require_master();
  connection_.set_push_handler([this](reply&& r) { on_push(std::move(r)); });
  connection_.set_ready_handler([this] { on_ready(); });
}

subscriber::~subscriber() {
  close();
}

void subscriber::close() {
  connection_.close(errc::client_closed);
}

void subscriber::send(std::string_view command, const std::vector<std::string_view>& names) {
  if (names.empty() || !connection_.ready()) return;  // on_ready sends everything later
  std::vector<std::string_view> args;
  args.reserve(names.size() + 1);
  args.push_back(command);
  args.insert(args.end(), names.begin(), names.end());
  std::string bytes;
  wire::encode_command(bytes, args);
  connection_.send_raw(bytes);
}

namespace {
constexpr std::string_view subscribe_command[] = {"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"};
constexpr std::string_view unsubscribe_command[] = {"UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE"};
constexpr std::string_view message_push[] = {"message", "pmessage", "smessage"};
constexpr std::string_view subscribed_push[] = {"subscribe", "psubscribe", "ssubscribe"};
constexpr std::string_view unsubscribed_push[] = {"unsubscribe", "punsubscribe", "sunsubscribe"};

template <std::size_t N>
int index_of(const std::string_view (&names)[N], std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<int>(i);
  return -1;
}
}  // namespace

void subscriber::send_subscribe(kind k, const std::vector<std::string_view>& names) {
  const auto command = subscribe_command[static_cast<int>(k)];
  if (k != kind::shard_channel) {
    send(command, names);
    return;
  }
  for (const auto name : names)
    send(command, {name});
}

std::uint64_t subscriber::add(kind k, const std::string& name, message_handler on_message,
                              std::function<void()> on_subscribed) {
  if (!started_) {
    started_ = true;
    // Failures are retried in the background; callers wait for on_subscribed with a deadline.
    connection_.start([](std::error_code, const std::string&) {});
  }
  const std::uint64_t id = next_id_++;
  auto& map = topics(k);
  auto [it, inserted] = map.try_emplace(name);
  auto e = std::make_shared<entry>(entry{id, std::move(on_message), std::move(on_subscribed)});
  it->second.entries.push_back(e);
  index_.emplace(id, std::make_pair(k, name));
  if (inserted) {
    send_subscribe(k, {name});
  } else if (it->second.confirmed && e->on_subscribed) {
    // Already live on the server. Report it asynchronously, like a fresh confirmation would be,
    // so callers never see their callback run inside add().
    io_.post([this, weak = std::weak_ptr<entry>(e)] {
      if (auto live = weak.lock(); live && index_.count(live->id)) live->on_subscribed();
    });
  }
  return id;
}

void subscriber::remove(std::uint64_t id) {
  auto found = index_.find(id);
  if (found == index_.end()) return;
  auto [k, name] = std::move(found->second);
  index_.erase(found);
  auto& map = topics(k);
  auto it = map.find(name);
  if (it == map.end()) return;
  auto& entries = it->second.entries;
  std::erase_if(entries, [id](const auto& e) { return e->id == id; });
  if (entries.empty()) {
    map.erase(it);
    if (connection_.ready()) {
      ++unsubscribing_[static_cast<int>(k)][name];
      send(unsubscribe_command[static_cast<int>(k)], {name});
    }
  }
}

void subscriber::on_ready() {
  for (auto& pending : unsubscribing_)
    pending.clear();
  for (int k = 0; k < 3; ++k) {
    std::vector<std::string_view> names;
    for (auto& [name, t] : topics_[k]) {
      t.confirmed = false;
      names.push_back(name);
    }
    send_subscribe(static_cast<kind>(k), names);
  }
}

void subscriber::deliver(const topic& t, std::string_view channel, std::string_view payload) {
  // A handler may remove itself (or others) while we iterate: walk a snapshot.
  const auto snapshot = t.entries;
  for (const auto& e : snapshot) {
    if (e->on_message) e->on_message(channel, payload);
  }
}

void subscriber::confirm(topic& t) {
  t.confirmed = true;
  const auto snapshot = t.entries;
  for (const auto& e : snapshot) {
    if (e->on_subscribed) e->on_subscribed();
  }
}

void subscriber::on_push(reply&& r) {
  if (r.is_error()) {
    // A refused SSUBSCRIBE (MOVED: the slot lives elsewhere now). The reply does not say which
    // channel; every unconfirmed sharded channel is a candidate, and moving a live one is
    // harmless (the topology resubscribes it where its slot lives).
    if (!displaced_) return;
    std::vector<std::string> names;
    for (const auto& [name, t] : topics(kind::shard_channel))
      if (!t.confirmed) names.push_back(name);
    for (const auto& name : names)
      displaced_(name);
    return;
  }
  if (!r.is_array() || r.elements().size() < 3 || !r.at(0).is_string()) return;
  const auto& type = r.at(0).str();
  auto text = [&](std::size_t i) -> std::string_view {
    const auto& e = r.at(i);
    return e.is_string() ? std::string_view(e.str()) : std::string_view();
  };
  if (const int k = index_of(message_push, type); k >= 0) {
    const bool pattern = k == static_cast<int>(kind::pattern);
    if (pattern && r.elements().size() < 4) return;
    auto& map = topics_[k];
    if (auto it = map.find(std::string(text(1))); it != map.end()) {
      deliver(it->second, text(pattern ? 2 : 1), text(pattern ? 3 : 2));
    }
  } else if (const int s = index_of(subscribed_push, type); s >= 0) {
    const std::string name(text(1));
    if (unsubscribing_[s].count(name)) return;  // stale, see header
    auto& map = topics_[s];
    if (auto it = map.find(name); it != map.end()) confirm(it->second);
  } else if (const int u = index_of(unsubscribed_push, type); u >= 0) {
    auto& pending = unsubscribing_[u];
    const std::string name(text(1));
    if (auto it = pending.find(name); it != pending.end()) {
      if (--it->second <= 0) pending.erase(it);
      return;
    }
    // Not asked for: the server dropped a sharded subscription because its slot moved.
    auto& map = topics_[u];
    if (auto it = map.find(name); it != map.end()) {
      it->second.confirmed = false;
      if (u == static_cast<int>(kind::shard_channel) && displaced_) displaced_(name);
    }
  }
}

}  // namespace dlock::net
