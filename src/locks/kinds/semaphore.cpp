// The semaphore, in Redisson's RSemaphore layout: the string NAME counts free permits, and a
// release publishes the new count on `redisson_sc:{NAME}`. Permits have no owner and no expiry
// on the server; the lease dlock hands out remembers how many to give back. Beside the layout,
// each grant leaves a mark, `{NAME}:grant:ID` ('taken' while held), so that an attempt whose
// reply was lost is undone exactly: a blind give-back would add permits the attempt never took
// whenever it had not run, or found too few.
#include <charconv>

#include "core/random.hpp"
#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "dlock/lease.hpp"
#include "dlock/lock.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/kinds/lock_kind.hpp"

namespace dlock::detail {

std::size_t permits_announced(std::string_view message) noexcept {
  long long count = 0;
  const auto [end, ec] = std::from_chars(message.data(), message.data() + message.size(), count);
  if (ec != std::errc() || end != message.data() + message.size()) return 1;
  return count < 1 ? 1 : static_cast<std::size_t>(count);
}

namespace {

// Longer than an attempt given up on could still be on its way to the server (held in a
// stalled network, a paused proxy); a mark outlives the hold otherwise only if its holder died.
constexpr std::string_view grant_mark_ms = "600000";

std::string grant_mark(const lock_call& c) {
  return suffixed_key(c.names.name, "grant:" + c.owner);
}

class semaphore_protocol final : public lock_kind {
 public:
  std::string_view name() const noexcept override { return "semaphore"; }
  std::string_view redis_type() const noexcept override { return "string"; }
  lock_type public_type() const noexcept override { return lock_type::other; }
  bool reentrant() const noexcept override { return false; }
  std::size_t max_holders() const noexcept override { return SIZE_MAX; }
  bool leased() const noexcept override { return false; }
  bool counts_permits() const noexcept override { return true; }
  // As many of our waiters as permits came back, not all of them.
  std::size_t woken_by(std::string_view message) const noexcept override {
    return permits_announced(message);
  }

  std::shared_ptr<const lock_names> names_of(std::string name,
                                             const std::string& fence_counter) const override {
    auto n = std::make_shared<lock_names>(std::move(name), fence_counter);
    n->channel = derived_key("redisson_sc", n->name);
    return n;
  }

  // Names the grant's mark: not an owner, since the permits have none.
  std::string owner_for(const std::string&, const lease_options& o) const override {
    if (!o.owner.empty()) {
      throw error(errc::invalid_argument, "a semaphore's permits have no owner id");
    }
    return random_hex(8);
  }

  void attempt(const lock_call& c, net::reply_callback done) const override {
    const std::string permits = std::to_string(c.permits);
    const auto mark = grant_mark(c);
    const std::string_view keys[] = {c.names.name, c.names.fence_key, mark, c.names.holder_key};
    const std::string_view args[] = {permits, grant_mark_ms, c.owner, c.identity};
    c.topo.eval(c.node, acquire_, with_record(keys, c), args, c.deadline, durability::replicas,
                std::move(done));
  }
  // A release gives the permits back and deletes the grant's mark; a drop, sent when the grant
  // may not have happened, gives them back only if the mark says they were taken, and voids the
  // mark so that an attempt still on its way takes none.
  void end_hold(const lock_call& c, hold_end how, net::reply_callback done) const override {
    const std::string permits = std::to_string(c.permits);
    const auto mark = grant_mark(c);
    const std::string_view keys[] = {c.names.name, c.names.channel, mark, c.names.holder_key};
    if (how == hold_end::release) {
      const std::string_view args[] = {permits, c.topo.publish_command(), "release", c.owner};
      c.topo.eval(c.node, release_, with_record(keys, c), args, c.deadline, durability::master,
                  std::move(done));
      return;
    }
    const std::string_view args[] = {permits, unlock_publisher(c, how), grant_mark_ms, c.owner};
    c.topo.eval(c.node, undo_, with_record(keys, c), args, c.deadline, durability::master,
                std::move(done));
  }
  // Never called: these leases have no watchdog and cannot be extended.
  void renew(topology&, node_id, std::span<const renewal_item>, net::clock::time_point,
             net::reply_callback done) const override {
    done(errc::invalid_argument, {});
  }

 private:
  const script acquire_{std::string(lua::semaphore_acquire)};
  const script release_{std::string(lua::semaphore_release)};
  const script undo_{std::string(lua::semaphore_undo)};
};

}  // namespace

const lock_kind& semaphore_kind() noexcept {
  static const semaphore_protocol kind;
  return kind;
}

}  // namespace dlock::detail
