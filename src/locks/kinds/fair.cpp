// The fair lock, in Redisson's RFairLock layout: the RLock hash NAME, the queue of waiting owner
// ids `redisson_lock_queue:{NAME}` and their deadlines `redisson_lock_timeout:{NAME}`. Each
// waiter listens on its own channel, `redisson_lock__channel:{NAME}:<owner>`, so a release
// wakes the next waiter and no one else.
#include "core/thread_number.hpp"
#include "dlock/keys.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/kinds/lock_kind.hpp"
#include "locks/kinds/renewal_call.hpp"

namespace dlock::detail {
namespace {

class fair_protocol final : public lock_kind {
 public:
  std::string_view name() const noexcept override { return "fair lock"; }
  std::string_view redis_type() const noexcept override { return "hash"; }
  lock_type public_type() const noexcept override { return lock_type::fair; }
  bool reentrant() const noexcept override { return true; }
  // The server's queue orders waiters, across clients and within one: every local waiter must
  // take its place there at once, not behind a local turn.
  std::size_t max_holders() const noexcept override { return SIZE_MAX; }
  bool keeps_waiter_place() const noexcept override { return true; }
  bool release_echoes() const noexcept override { return false; }
  bool lingers() const noexcept override { return true; }

  std::string owner_for(const std::string& client_id, const lease_options& o) const override {
    return client_id + ":" + (o.owner.empty() ? std::to_string(current_thread_number()) : o.owner);
  }

  std::shared_ptr<const lock_names> names_of(std::string name,
                                             const std::string& fence_counter) const override {
    auto n = std::make_shared<lock_names>(std::move(name), fence_counter);
    n->aux_key1 = derived_key("redisson_lock_queue", n->name);
    n->aux_key2 = derived_key("redisson_lock_timeout", n->name);
    n->publish_channel = n->channel;
    return n;
  }

  std::shared_ptr<const lock_names> names_for(std::shared_ptr<const lock_names> names,
                                              const std::string& owner) const override {
    auto n = std::make_shared<lock_names>(*names);
    n->channel = names->publish_channel + ":" + owner;
    return n;
  }

  void attempt(const lock_call& c, net::reply_callback done) const override {
    const std::string lease_ms = std::to_string(c.lease.count());
    const std::string waiter_ms = std::to_string(c.waiter_lease.count());
    const std::string_view keys[] = {c.names.name, c.names.aux_key1, c.names.aux_key2,
                                     c.names.fence_key, c.names.holder_key};
    const std::string_view args[] = {lease_ms, c.owner, waiter_ms, c.may_queue ? "1" : "0",
                                     c.identity};
    c.topo.eval(c.node, acquire_, with_record(keys, c), args, c.deadline, durability::replicas,
                std::move(done));
  }

  // One script for both: a release counts one hold down, a drop ends the owner's outright; at
  // the end of the hold the next waiter in the queue is woken, on its own channel.
  void end_hold(const lock_call& c, hold_end how, net::reply_callback done) const override {
    const std::string lease_ms = std::to_string(c.lease.count());
    const std::string_view keys[] = {c.names.name, c.names.aux_key1, c.names.aux_key2,
                                     c.names.publish_channel, c.names.holder_key};
    const std::string_view args[] = {lease_ms, c.owner, unlock_message, unlock_publisher(c, how),
                                     how == hold_end::release ? "0" : "1"};
    c.topo.eval(c.node, release_, with_record(keys, c), args, c.deadline, durability::master,
                std::move(done));
  }

  void abandon(const lock_call& c, net::reply_callback done) const override {
    const std::string_view keys[] = {c.names.name, c.names.aux_key1, c.names.aux_key2,
                                     c.names.publish_channel};
    const std::string_view args[] = {c.owner, unlock_message, c.topo.publish_command()};
    c.topo.eval(c.node, leave_, keys, args, c.deadline, durability::master, std::move(done));
  }

  void renew(topology& t, node_id node, std::span<const renewal_item> items,
             net::clock::time_point deadline, net::reply_callback done) const override {
    send_renewal(t, node, renew_, items, deadline, std::move(done));
  }

 private:
  const script acquire_{std::string(lua::fair_acquire)};
  const script release_{std::string(lua::fair_release)};
  const script leave_{std::string(lua::fair_leave)};
  const script renew_{std::string(lua::reentrant_renew)};
};

}  // namespace

const lock_kind& fair_kind() noexcept {
  static const fair_protocol kind;
  return kind;
}

}  // namespace dlock::detail
