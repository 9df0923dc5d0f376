// The reentrant lock, in Redisson's RLock layout: a hash NAME whose field
// "<client-uuid>:<thread or owner id>" holds the owner's hold count, with a PEXPIRE lease.
#include "core/thread_number.hpp"
#include "dlock/error.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/kinds/lock_kind.hpp"
#include "locks/kinds/renewal_call.hpp"

namespace dlock::detail {
namespace {

class reentrant_protocol final : public lock_kind {
 public:
  std::string_view name() const noexcept override { return "reentrant"; }
  std::string_view redis_type() const noexcept override { return "hash"; }
  lock_type public_type() const noexcept override { return lock_type::reentrant; }
  bool reentrant() const noexcept override { return true; }

  // Built in one allocation: it is made for every acquisition.
  std::string owner_for(const std::string& client_id, const lease_options& o) const override {
    const std::string thread = o.owner.empty() ? std::to_string(current_thread_number()) : "";
    const std::string_view suffix = o.owner.empty() ? std::string_view(thread) : o.owner;
    std::string owner;
    owner.reserve(client_id.size() + 1 + suffix.size());
    owner += client_id;
    owner += ':';
    owner += suffix;
    return owner;
  }

  void attempt(const lock_call& c, net::reply_callback done) const override {
    const std::string lease_ms = std::to_string(c.lease.count());
    const std::string_view keys[] = {c.names.name, c.names.fence_key, c.names.holder_key};
    const std::string_view args[] = {lease_ms, c.owner, c.identity};
    c.topo.eval(c.node, acquire_, with_record(keys, c), args, c.deadline, durability::replicas,
                std::move(done));
  }

  // A release counts one hold down (the lock goes with the last); a drop removes the owner's
  // entry whatever its count.
  void end_hold(const lock_call& c, hold_end how, net::reply_callback done) const override {
    const std::string_view keys[] = {c.names.name, c.names.channel, c.names.holder_key};
    if (how == hold_end::release) {
      const std::string lease_ms = std::to_string(c.lease.count());
      const std::string_view args[] = {lease_ms, c.owner, unlock_message, c.topo.publish_command()};
      c.topo.eval(c.node, release_, with_record(keys, c), args, c.deadline, durability::master,
                  std::move(done));
      return;
    }
    const std::string_view args[] = {c.owner, unlock_message, unlock_publisher(c, how)};
    c.topo.eval(c.node, drop_, with_record(keys, c), args, c.deadline, durability::master,
                std::move(done));
  }

  void renew(topology& t, node_id node, std::span<const renewal_item> items,
             net::clock::time_point deadline, net::reply_callback done) const override {
    send_renewal(t, node, renew_, items, deadline, std::move(done));
  }

 private:
  const script acquire_{std::string(lua::reentrant_acquire)};
  const script release_{std::string(lua::reentrant_release)};
  const script drop_{std::string(lua::reentrant_drop)};
  const script renew_{std::string(lua::reentrant_renew)};
};

}  // namespace

const lock_kind& reentrant_kind() noexcept {
  static const reentrant_protocol kind;
  return kind;
}

}  // namespace dlock::detail
