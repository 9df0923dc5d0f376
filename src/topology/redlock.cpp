#include "topology/redlock.hpp"

#include <condition_variable>
#include <mutex>
#include <numeric>

#include "dlock/error.hpp"

namespace dlock::detail {

redlock_topology::redlock_topology(const std::vector<connection_options>& masters,
                                   std::shared_ptr<net::io_thread> io)
    : io_(std::move(io)) {
  if (masters.size() < 3) {
    throw error(errc::invalid_argument,
                "RedLock needs at least 3 independent masters (5 is usual), got " +
                    std::to_string(masters.size()));
  }
  // The first attempts report here; the constructor returns once a majority is up (the rest
  // go on connecting in the background, so a stalled master does not hold the client up), or
  // once every master has answered. Shared: reports may come after the constructor returned.
  struct first_attempts {
    std::mutex m;
    std::condition_variable cv;
    std::size_t up = 0, answered = 0;
    std::pair<std::error_code, std::string> refused, unreachable;
  };
  auto first = std::make_shared<first_attempts>();
  for (const auto& m : masters) {
    const auto where = m.host + ":" + std::to_string(m.port);
    masters_.push_back(std::make_unique<standalone_topology>(
        m, io_, write_ack{},
        connect_settings{
            .require_master = false,
            .background = true,
            .on_first_attempt = [first, where](std::error_code ec, const std::string& detail) {
              std::lock_guard lock(first->m);
              ++first->answered;
              if (!ec) {
                ++first->up;
              } else if (ec == errc::auth_failed || ec == errc::tls_failed) {
                if (!first->refused.first) {
                  first->refused = {ec, "RedLock master " + where + ": " + detail};
                }
              } else if (!first->unreachable.first) {
                first->unreachable = {ec, "RedLock master " + where + ": " + detail};
              }
              first->cv.notify_all();
            }}));
  }
  all_.resize(masters_.size());
  std::iota(all_.begin(), all_.end(), node_id{0});
  std::pair<std::error_code, std::string> failure;
  {
    std::unique_lock lock(first->m);
    first->cv.wait(lock, [&] {
      return first->refused.first || first->up >= masters.size() / 2 + 1 ||
             first->answered == masters.size();
    });
    // Wrong credentials or TLS settings on any master are a mistake to fix, not an outage to
    // ride out; with none reachable there is nothing to lock on.
    if (first->refused.first) {
      failure = first->refused;
    } else if (first->up == 0) {
      failure = {errc::connect_failed,
                 "no RedLock master is reachable; the first said: " + first->unreachable.second};
    }
  }
  if (failure.first) {
    // The client's I/O thread has served only these connections so far: stopping it lets them
    // close from this thread as the members unwind (what the client does after a close).
    io_->stop();
    throw error(failure.first, failure.second);
  }
}

redlock_topology::~redlock_topology() = default;

net::io_thread& redlock_topology::io() noexcept {
  return *io_;
}

std::span<const node_id> redlock_topology::nodes_for(std::string_view) {
  return all_;
}

route redlock_topology::route_of(node_id, std::string_view) const {
  return {};
}

void redlock_topology::eval(node_id node, const script& s, std::span<const std::string_view> keys,
                            std::span<const std::string_view> args, net::clock::time_point deadline,
                            durability d, net::reply_callback done) {
  // A master that is down answers at once: RedLock decides on the others, and a command queued
  // for its return would only delay the decision until the node timeout. One still on its first
  // attempt (the client has just started) is not known to be down: it gets the call.
  if (connection_for(node, keys).down()) {
    answer_lost(std::move(done));
    return;
  }
  masters_.at(node)->eval(0, s, keys, args, deadline, d, std::move(done));
}

void redlock_topology::queued_for_return::eval(node_id node, const script& s,
                                               std::span<const std::string_view> keys,
                                               std::span<const std::string_view> args,
                                               net::clock::time_point deadline, durability d,
                                               net::reply_callback done) {
  // Ordered behind nothing of ours: while the connection is down, redlock_topology::eval sends
  // nothing to it, so the outbox holds only such cleanup, and whatever is sent once it is back
  // goes out behind it. Down or up cannot change meanwhile: both happen on this (the I/O) thread.
  if (!masters_.connection_for(node, keys).down()) {
    masters_.answer_lost(std::move(done));
    return;
  }
  masters_.masters_.at(node)->eval(0, s, keys, args, deadline, d, std::move(done));
}

// Answers a call that is not sent with errc::connection_lost, from the I/O thread as a reply.
void redlock_topology::answer_lost(net::reply_callback done) {
  io_->post([done = std::move(done)] { done(errc::connection_lost, {}); });
}

// The connection a call on `keys` goes to on master `node`.
net::connection& redlock_topology::connection_for(node_id node,
                                                  std::span<const std::string_view> keys) {
  return masters_.at(node)->connection_for(keys.empty() ? std::string_view() : keys.front());
}

void redlock_topology::command(std::string_view key, std::span<const std::string_view> args,
                               net::clock::time_point deadline, net::reply_callback done) {
  first_up().command(key, args, deadline, std::move(done));
}

standalone_topology& redlock_topology::first_up() noexcept {
  for (auto& m : masters_) {
    if (redis_client_access::get(m->redis()).commands->up()) return *m;
  }
  return *masters_.front();
}

std::uint64_t redlock_topology::subscribe(node_id, const std::string& channel,
                                          message_handler on_message,
                                          std::function<void()> on_subscribed) {
  std::vector<std::uint64_t> ids;
  ids.reserve(masters_.size());
  for (auto& m : masters_)
    ids.push_back(m->subscribe(0, channel, on_message, on_subscribed));
  const auto id = ++next_subscription_;
  subscriptions_.emplace(id, std::move(ids));
  return id;
}

void redlock_topology::unsubscribe(std::uint64_t id) {
  const auto it = subscriptions_.find(id);
  if (it == subscriptions_.end()) return;
  for (std::size_t i = 0; i < masters_.size(); ++i)
    masters_[i]->unsubscribe(it->second[i]);
  subscriptions_.erase(it);
}

void redlock_topology::close(std::error_code reason) {
  for (auto& m : masters_)
    m->close(reason);
}

redis_client& redlock_topology::redis() noexcept {
  return first_up().redis();
}

std::vector<redis_client*> redlock_topology::masters() {
  std::vector<redis_client*> out;
  for (auto& m : masters_)
    out.push_back(&m->redis());
  return out;
}

}  // namespace dlock::detail
