// The pub/sub side of a client: one connection in subscribed mode, shared by every subscription
// of the client. Channels are subscribed once however many local handlers listen on them, and
// the whole set is re-subscribed after a reconnect. Sharded channels (SSUBSCRIBE, Redis 7
// cluster) are subscribed one per command, since one command may only name channels of one slot.
// Confined to the I/O thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "dlock/redis/client.hpp"
#include "net/connection.hpp"

namespace dlock::net {

class subscriber {
 public:
  enum class kind { channel, pattern, shard_channel };

  /// `require_master`: every connection checks ROLE (a Sentinel's master).
  subscriber(io_thread& io, const connection_options& options,
             std::shared_ptr<asio::ssl::context> tls, bool require_master = false);
  ~subscriber();
  subscriber(const subscriber&) = delete;
  subscriber& operator=(const subscriber&) = delete;

  /// Registers a handler (I/O thread only). `on_subscribed` runs each time the server confirms
  /// the topic: at first, and again after every reconnect (so a waiter can re-check what it
  /// may have missed while disconnected). Returns an id for `remove`.
  std::uint64_t add(kind k, const std::string& name, message_handler on_message,
                    std::function<void()> on_subscribed);
  /// Drops a handler; the topic is unsubscribed when its last handler goes. Unknown ids are
  /// ignored.
  void remove(std::uint64_t id);
  void close();
  /// Runs when the server drops a sharded subscription we did not give up (its slot moved to
  /// another node) or refuses one (MOVED): the cluster topology then moves it. Its handlers stay
  /// registered here until `remove`.
  void set_displaced_handler(std::function<void(const std::string& channel)> handler) {
    displaced_ = std::move(handler);
  }
  /// Moves the connection to another server (a Sentinel failover): the current socket is dropped
  /// and everything is subscribed again there.
  void retarget(const std::string& host, std::uint16_t port) { connection_.retarget(host, port); }
  void set_attempt_failed_handler(std::function<void(std::error_code)> handler) {
    connection_.set_attempt_failed_handler(std::move(handler));
  }
  bool up() const noexcept { return connection_.up(); }

 private:
  struct entry {
    std::uint64_t id;
    message_handler on_message;
    std::function<void()> on_subscribed;
  };
  struct topic {
    std::vector<std::shared_ptr<entry>> entries;
    bool confirmed = false;
  };
  using topic_map = std::unordered_map<std::string, topic>;

  topic_map& topics(kind k) { return topics_[static_cast<int>(k)]; }
  void send(std::string_view command, const std::vector<std::string_view>& names);
  void send_subscribe(kind k, const std::vector<std::string_view>& names);
  void on_push(reply&& r);
  void on_ready();
  static void deliver(const topic& t, std::string_view channel, std::string_view payload);
  static void confirm(topic& t);

  io_thread& io_;
  connection connection_;
  bool started_ = false;
  std::uint64_t next_id_ = 1;
  topic_map topics_[3];  // by kind
  std::function<void(const std::string&)> displaced_;
  // UNSUBSCRIBEs sent but not yet confirmed, per kind and name. While one is outstanding, a
  // "subscribe" confirmation belongs to an older SUBSCRIBE that the UNSUBSCRIBE undoes, so it
  // must not be taken as confirming the topic's current subscription.
  std::unordered_map<std::string, int> unsubscribing_[3];
  std::unordered_map<std::uint64_t, std::pair<kind, std::string>> index_;
};

}  // namespace dlock::net
