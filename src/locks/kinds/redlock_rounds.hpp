// The inside of the RedLock kind (redlock.hpp), shared by its files: the protocol object, and
// the rounds that run one call over every master. The protocol object is here; redlock.cpp has
// the renewal round, redlock_attempt.cpp the acquisition one, redlock_release.cpp the one that
// ends a hold.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/sync.hpp"
#include "dlock/error.hpp"
#include "dlock_lua_scripts.hpp"
#include "locks/kinds/redlock.hpp"

namespace dlock::detail::redlock_rounds {

using std::chrono::milliseconds;
using vote = quorum_round::vote;
using verdict = quorum_round::verdict;
using outcome_type = attempt_outcome::type;

inline bool transient(std::error_code ec) {
  return ec == errc::timeout || ec == errc::connection_lost || ec == errc::server_busy ||
         ec == errc::client_closed;
}

// The error a round reports when it missed its majority because masters gave no usable answer:
// one that waiting cannot fix (the server's own words: a wrong type, a permission) before one it
// can (a master down or slow).
struct round_error {
  std::error_code ec;
  reply server_reply;
  void note(std::error_code e, const reply& r) {
    if (!ec || (transient(ec) && !transient(e))) {
      ec = e;
      server_reply = r;
    }
  }
};

// What a round keeps of the lock_call it serves: the call itself refers to the caller's objects.
struct call_copy {
  topology& topo;
  lock_names names;
  std::string owner;
  milliseconds lease;
  std::string identity{};
  lock_call at(node_id node, net::clock::time_point deadline) const {
    lock_call call{topo, node, names, owner, lease, deadline};
    call.identity = identity;
    return call;
  }
};

// Cleanup (releases after a miss, drops of partial extensions) is not the caller's to wait for,
// but should not be cut shorter than a master's usual answer.
inline net::clock::time_point cleanup_deadline(net::clock::time_point at_least) {
  return std::max(at_least, net::clock::now() + std::chrono::seconds(1));
}

class redlock_protocol;

// Whether this attempt re-entered a hold its owner has: the owner holds the lock through this
// client (the caller's own knowledge), and most of the masters that granted the attempt counted
// a re-entry. The masters' answers alone are not enough: a master can keep a stale hold of the
// same owner, from an attempt it ran after its client had given up on it (the connection was
// lost with the attempt on the wire, so the release after it could not follow it there). Taken
// for a re-entry, such a hold would be handed out without its fence written back, and would
// outlive the release (which only counts it down).
inline bool is_reentry(bool holds_already, const std::vector<outcome_type>& said) {
  const auto reentered = std::count(said.begin(), said.end(), outcome_type::reentered);
  const auto granted = std::count(said.begin(), said.end(), outcome_type::granted);
  return holds_already && reentered > 0 && reentered >= granted;
}

// One acquisition attempt over every master.
class attempt_round : public std::enable_shared_from_this<attempt_round> {
 public:
  attempt_round(const redlock_protocol& kind, const lock_call& c, std::size_t masters,
                net::reply_callback done);
  void start();

 private:
  // What on_won needs of a round that a majority granted.
  struct won_round {
    std::vector<outcome_type> said;
    std::vector<std::int64_t> drawn;
    std::int64_t fence = 0;
  };
  void on_reply(std::size_t i, std::error_code ec, const reply& r);
  // Acts on the round's decision: a miss is handled here (false); a win fills `won` for on_won,
  // which runs without the mutex (true).
  bool act_on_decision(won_round& won) DLOCK_REQUIRES(mutex_);
  void on_won(std::vector<outcome_type> said, const std::vector<std::int64_t>& drawn,
              std::int64_t fence);
  void raise_fence(const std::vector<outcome_type>& said, const std::vector<std::int64_t>& drawn,
                   std::int64_t fence);
  void on_fence_raised(std::size_t i, std::error_code ec, const reply& r, std::int64_t fence);
  void miss(const quorum_round& r, const round_error& e) DLOCK_REQUIRES(mutex_);
  void finish(std::error_code ec, reply r);

  const redlock_protocol& kind_;
  const call_copy call_;
  const bool holds_already_;  // lock_call::holds_already
  const net::clock::time_point started_;
  const net::clock::time_point node_deadline_;
  const net::clock::time_point cleanup_at_;
  mutex mutex_;  // replies come on the I/O thread while start() may still run on a user thread
  quorum_round round_ DLOCK_GUARDED_BY(mutex_);
  quorum_round fence_round_ DLOCK_GUARDED_BY(mutex_);
  std::vector<outcome_type> said_ DLOCK_GUARDED_BY(mutex_);
  std::vector<std::int64_t> drawn_ DLOCK_GUARDED_BY(mutex_);  // each grant's counter reading
  round_error error_ DLOCK_GUARDED_BY(mutex_);
  net::reply_callback done_ DLOCK_GUARDED_BY(mutex_);
  bool sending_ DLOCK_GUARDED_BY(mutex_) = true;    // start() is still sending the attempts
  bool deferred_ DLOCK_GUARDED_BY(mutex_) = false;  // decided meanwhile: start() acts on it
};

// One renewal batch over every master: per hold, a majority of renewals or of refusals decides.
class renewal_round : public std::enable_shared_from_this<renewal_round> {
 public:
  renewal_round(const redlock_protocol& kind, topology& t, std::span<const renewal_item> items,
                std::size_t masters, net::reply_callback done);
  void start(net::clock::time_point deadline);

 private:
  void on_reply(std::error_code ec, const reply& r);

  const redlock_protocol& kind_;
  topology& topo_;
  std::vector<std::string> names_, holder_keys_, owners_;
  std::vector<milliseconds> leases_;
  std::vector<renewal_item> items_;  // pointing into names_, holder_keys_ and owners_
  const std::size_t masters_;
  mutex mutex_;
  std::vector<std::size_t> renewed_ DLOCK_GUARDED_BY(mutex_), refused_ DLOCK_GUARDED_BY(mutex_);
  std::size_t answered_ DLOCK_GUARDED_BY(mutex_) = 0;
  net::reply_callback done_ DLOCK_GUARDED_BY(mutex_);
};

// The end of a hold (a release or a drop) on every master: confirmed (the largest count any
// master returned) when a majority answered with an integer, or (a release) when it freed the
// lock on some and a majority answered either that or nil; "not held" (nil) when a majority
// answered nil, unconfirmed (the first error) otherwise. Each master is bounded by the node
// timeout (one that is down answers at once).
//
// A release of a kind that cannot count a hold twice is reported as soon as a majority has
// confirmed it, as node-redlock does; the slower masters' answers come after, and the call's
// `settled` guard, which a closing client waits for, is let go only then: a process that exits
// right after unlock() does not leave its lock on them until the lease runs out. A reentrant
// release waits for every master, since the answers of all of them tell whether some master
// keeps a stale count to drop before the owner's next attempt can meet it.
class release_round : public std::enable_shared_from_this<release_round> {
 public:
  release_round(const redlock_protocol& kind, const lock_call& c, hold_end how,
                net::reply_callback done);
  void start();

 private:
  // What is left to do once the round is decided, without the mutex.
  struct decided {
    std::error_code ec;
    reply out;
    std::vector<node_id> stale;      // masters that keep a stale count of the owner's
    std::vector<node_id> on_return;  // masters that get the drop when they are back
    net::reply_callback report;
  };
  void on_answer(std::size_t i, node_id node, std::error_code ec, const reply& r);
  // Decides once enough masters have answered: true, with `d` filled in, the first time.
  bool decide(decided& d) DLOCK_REQUIRES(mutex_);
  void finish(decided d);

  const redlock_protocol& kind_;
  const call_copy call_;
  const std::shared_ptr<void> settled_;  // lock_call::settled: let go with the last answer
  const hold_end how_;
  const bool early_;         // reported once a majority has confirmed it
  const bool always_final_;  // ends the hold whatever the masters answer
  const net::clock::time_point deadline_;
  mutex mutex_;
  std::vector<std::optional<std::int64_t>> counts_ DLOCK_GUARDED_BY(mutex_);  // integer answers
  std::vector<node_id> lost_ DLOCK_GUARDED_BY(mutex_);  // a reentrant release's, see on_answer
  std::size_t answered_ DLOCK_GUARDED_BY(mutex_) = 0, not_held_ DLOCK_GUARDED_BY(mutex_) = 0;
  round_error error_ DLOCK_GUARDED_BY(mutex_);
  net::reply_callback done_ DLOCK_GUARDED_BY(mutex_);
  bool reported_ DLOCK_GUARDED_BY(mutex_) = false;
};

class redlock_protocol final : public lock_kind {
 public:
  redlock_protocol(const lock_kind& base, quorum_timing timing, quorum_counters& counters)
      : base_(base), timing_(timing), counters_(counters) {}

  std::string_view name() const noexcept override { return base_.name(); }
  std::string_view redis_type() const noexcept override { return base_.redis_type(); }
  lock_type public_type() const noexcept override { return base_.public_type(); }
  bool reentrant() const noexcept override { return base_.reentrant(); }
  std::size_t max_holders() const noexcept override { return base_.max_holders(); }
  std::string owner_for(const std::string& client_id, const lease_options& o) const override {
    return base_.owner_for(client_id, o);
  }
  std::string permit_id(const std::string& owner) const override { return base_.permit_id(owner); }
  attempt_outcome decode_attempt(const reply& r) const override { return base_.decode_attempt(r); }

  void attempt(const lock_call& c, net::reply_callback done) const override {
    std::make_shared<attempt_round>(*this, c, c.topo.nodes_for(c.names.name).size(),
                                    std::move(done))
        ->start();
  }

  void end_hold(const lock_call& c, hold_end how, net::reply_callback done) const override {
    std::make_shared<release_round>(*this, c, how, std::move(done))->start();
  }

  void renew(topology& t, node_id, std::span<const renewal_item> items,
             net::clock::time_point deadline, net::reply_callback done) const override {
    const auto masters = items.empty() ? 0 : t.nodes_for(*items.front().name).size();
    auto round = std::make_shared<renewal_round>(*this, t, items, masters, std::move(done));
    auto shortest = items.empty() ? milliseconds(0) : items.front().lease;
    for (const auto& item : items)
      shortest = std::min(shortest, item.lease);
    round->start(std::min(deadline, net::clock::now() + timing_.node_timeout(shortest)));
  }

  // Sends the drop of the owner's hold to master `node`, whose connection is down, for when it
  // is back (topology::when_back): a hold that an attempt may have left there (it was on the wire
  // when the connection dropped, or ran late) then ends with the master's return instead of
  // lasting the lease out, a lease in which the other contenders must find their majority among
  // the other masters. For cleanup that is final (a miss, a release that ends the hold): nobody
  // waits for it, and it gives up at the lease's end, when such a hold is gone anyway. Does
  // nothing if the master is up again by now: something newer may have gone to it since.
  void drop_when_back(const call_copy& call, node_id node) const {
    auto* later = call.topo.when_back();
    if (!later || call.lease <= milliseconds(0)) return;
    const call_copy on_return{*later, call.names, call.owner, call.lease};
    base_.drop(on_return.at(node, net::clock::now() + call.lease), [](std::error_code, reply) {});
  }

  const lock_kind& base() const noexcept { return base_; }
  const quorum_timing& timing() const noexcept { return timing_; }
  quorum_counters& counters() const noexcept { return counters_; }
  const script& fence_raise() const noexcept { return fence_raise_; }

 private:
  const lock_kind& base_;
  const quorum_timing timing_;
  quorum_counters& counters_;
  const script fence_raise_{std::string(lua::fence_raise)};
};

}  // namespace dlock::detail::redlock_rounds
