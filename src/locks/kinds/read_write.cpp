// The read-write lock, in Redisson's RReadWriteLock layout (read_acquire.lua describes it): the
// read side, the write side, and the write side as an upgrade of a read hold. The three share
// the hash, the channel `redisson_rwlock:{NAME}` and dlock's writers' intent key.
#include "core/thread_number.hpp"
#include "dlock/keys.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/kinds/lock_kind.hpp"
#include "locks/kinds/renewal_call.hpp"

namespace dlock::detail {
namespace {

// A read release publishes "0", a write release "1" (Redisson's messages); either may let
// several of our waiters in.
constexpr std::string_view read_unlock_message = "0";
constexpr std::string_view write_unlock_message = "1";

class read_write_side : public lock_kind {
 public:
  std::string_view redis_type() const noexcept override { return "hash"; }
  lock_type public_type() const noexcept override { return lock_type::read_write; }
  bool reentrant() const noexcept override { return true; }
  // Readers and writers of one client wait in one local queue (they share the channel), and
  // every one of them attempts: the server decides who may hold it, one writer or many readers.
  std::size_t max_holders() const noexcept override { return SIZE_MAX; }
  std::size_t woken_by(std::string_view) const noexcept override { return SIZE_MAX; }

  std::shared_ptr<const lock_names> names_of(std::string name,
                                             const std::string& fence_counter) const override {
    auto n = std::make_shared<lock_names>(std::move(name), fence_counter);
    n->channel = derived_key("redisson_rwlock", n->name);
    n->aux_key1 = suffixed_key(n->name, "write_intent");
    return n;
  }

 protected:
  static std::string reader_of(const std::string& client_id, const lease_options& o) {
    return client_id + ":" + (o.owner.empty() ? std::to_string(current_thread_number()) : o.owner);
  }
};

class read_protocol final : public read_write_side {
 public:
  std::string_view name() const noexcept override { return "read lock"; }

  std::string owner_for(const std::string& client_id, const lease_options& o) const override {
    return reader_of(client_id, o);
  }

  void attempt(const lock_call& c, net::reply_callback done) const override {
    const std::string lease_ms = std::to_string(c.lease.count());
    const std::string_view keys[] = {c.names.name, c.names.fence_key, c.names.aux_key1,
                                     c.names.holder_key};
    const std::string_view args[] = {lease_ms, c.owner, c.identity};
    c.topo.eval(c.node, acquire_, with_record(keys, c), args, c.deadline, durability::replicas,
                std::move(done));
  }
  // A release gives back one read hold, a drop every one the owner has.
  void end_hold(const lock_call& c, hold_end how, net::reply_callback done) const override {
    const std::string_view keys[] = {c.names.name, c.names.channel, c.names.holder_key};
    const std::string_view args[] = {read_unlock_message, c.owner, unlock_publisher(c, how),
                                     how == hold_end::release ? "0" : "1"};
    c.topo.eval(c.node, release_, with_record(keys, c), args, c.deadline, durability::master,
                std::move(done));
  }
  void renew(topology& t, node_id node, std::span<const renewal_item> items,
             net::clock::time_point deadline, net::reply_callback done) const override {
    send_renewal(t, node, renew_, items, deadline, std::move(done));
  }

 private:
  const script acquire_{std::string(lua::read_acquire)};
  const script release_{std::string(lua::read_release)};
  const script renew_{std::string(lua::read_renew)};
};

class write_protocol final : public read_write_side {
 public:
  explicit write_protocol(bool upgrade) : upgrade_(upgrade) {}

  std::string_view name() const noexcept override {
    return upgrade_ ? "write lock (upgrade)" : "write lock";
  }
  // While it waits, a writer keeps an intent that holds new readers back; it lapses within the
  // waiter lease if the writer dies.
  bool keeps_waiter_place() const noexcept override { return true; }

  std::string owner_for(const std::string& client_id, const lease_options& o) const override {
    return reader_of(client_id, o) + ":write";
  }

  void attempt(const lock_call& c, net::reply_callback done) const override {
    const std::string lease_ms = std::to_string(c.lease.count());
    const std::string waiter_ms = std::to_string(c.waiter_lease.count());
    const std::string_view keys[] = {c.names.name, c.names.fence_key, c.names.aux_key1,
                                     c.names.holder_key};
    const std::string_view args[] = {
        lease_ms, c.owner, waiter_ms, c.may_queue ? "1" : "0", upgrade_ ? "1" : "0", c.identity};
    c.topo.eval(c.node, acquire_, with_record(keys, c), args, c.deadline, durability::replicas,
                std::move(done));
  }
  // A release counts the writer's hold down, a drop ends it whatever its count.
  void end_hold(const lock_call& c, hold_end how, net::reply_callback done) const override {
    const std::string lease_ms = std::to_string(c.lease.count());
    const std::string_view keys[] = {c.names.name, c.names.channel, c.names.holder_key};
    const std::string_view args[] = {write_unlock_message, c.owner, unlock_publisher(c, how),
                                     how == hold_end::release ? "0" : "1", lease_ms};
    c.topo.eval(c.node, release_, with_record(keys, c), args, c.deadline, durability::master,
                std::move(done));
  }
  void abandon(const lock_call& c, net::reply_callback done) const override {
    const std::string_view keys[] = {c.names.name, c.names.aux_key1, c.names.channel};
    const std::string_view args[] = {c.owner, write_unlock_message, c.topo.publish_command()};
    c.topo.eval(c.node, abandon_, keys, args, c.deadline, durability::master, std::move(done));
  }
  // The writer's hold is a hash field with a count, renewed as a reentrant lock's.
  void renew(topology& t, node_id node, std::span<const renewal_item> items,
             net::clock::time_point deadline, net::reply_callback done) const override {
    send_renewal(t, node, renew_, items, deadline, std::move(done));
  }

 private:
  bool upgrade_;
  const script acquire_{std::string(lua::write_acquire)};
  const script release_{std::string(lua::write_release)};
  const script abandon_{std::string(lua::write_abandon)};
  const script renew_{std::string(lua::reentrant_renew)};
};

}  // namespace

const lock_kind& read_kind() noexcept {
  static const read_protocol kind;
  return kind;
}

const lock_kind& write_kind() noexcept {
  static const write_protocol kind(false);
  return kind;
}

const lock_kind& upgrade_kind() noexcept {
  static const write_protocol kind(true);
  return kind;
}

}  // namespace dlock::detail
