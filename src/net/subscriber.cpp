#include "net/subscriber.hpp"

#include "dlock/error.hpp"

namespace dlock::net {

subscriber::subscriber(io_thread& io, const connection_options& options,
                       std::shared_ptr<asio::ssl::context> tls)
    : io_(io), connection_(io, options, std::move(tls), connection::mode::pubsub) {
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
    send(k == kind::channel ? "SUBSCRIBE" : "PSUBSCRIBE", {name});
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
      send(k == kind::channel ? "UNSUBSCRIBE" : "PUNSUBSCRIBE", {name});
    }
  }
}

void subscriber::on_ready() {
  for (auto& pending : unsubscribing_)
    pending.clear();
  std::vector<std::string_view> names;
  for (auto& [name, t] : channels_) {
    t.confirmed = false;
    names.push_back(name);
  }
  send("SUBSCRIBE", names);
  names.clear();
  for (auto& [name, t] : patterns_) {
    t.confirmed = false;
    names.push_back(name);
  }
  send("PSUBSCRIBE", names);
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
  if (!r.is_array() || r.elements().size() < 3 || !r.at(0).is_string()) return;
  const auto& type = r.at(0).str();
  auto text = [&](std::size_t i) -> std::string_view {
    const auto& e = r.at(i);
    return e.is_string() ? std::string_view(e.str()) : std::string_view();
  };
  if (type == "message") {
    if (auto it = channels_.find(std::string(text(1))); it != channels_.end()) {
      deliver(it->second, text(1), text(2));
    }
  } else if (type == "pmessage" && r.elements().size() >= 4) {
    if (auto it = patterns_.find(std::string(text(1))); it != patterns_.end()) {
      deliver(it->second, text(2), text(3));
    }
  } else if (type == "subscribe" || type == "psubscribe") {
    const kind k = type == "subscribe" ? kind::channel : kind::pattern;
    const std::string name(text(1));
    if (unsubscribing_[static_cast<int>(k)].count(name)) return;  // stale, see header
    auto& map = topics(k);
    if (auto it = map.find(name); it != map.end()) confirm(it->second);
  } else if (type == "unsubscribe" || type == "punsubscribe") {
    auto& pending = unsubscribing_[type == "unsubscribe" ? 0 : 1];
    if (auto it = pending.find(std::string(text(1))); it != pending.end() && --it->second <= 0) {
      pending.erase(it);
    }
  }
}

}  // namespace dlock::net
