#include "locks/kinds/redlock.hpp"

#include <algorithm>
#include <vector>

#include "core/sync.hpp"
#include "dlock/error.hpp"
#include "dlock_lua_scripts.hpp"

namespace dlock::detail {
namespace {

using std::chrono::milliseconds;
using vote = quorum_round::vote;
using verdict = quorum_round::verdict;
using outcome_type = attempt_outcome::type;

bool transient(std::error_code ec) {
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
  lock_call at(node_id node, net::clock::time_point deadline) const {
    return {topo, node, names, owner, lease, deadline};
  }
};

// Cleanup (releases after a miss, drops of partial extensions) is not the caller's to wait for,
// but should not be cut shorter than a master's usual answer.
net::clock::time_point cleanup_deadline(net::clock::time_point at_least) {
  return std::max(at_least, net::clock::now() + std::chrono::seconds(1));
}

class redlock_protocol;

// One acquisition attempt over every master.
class attempt_round : public std::enable_shared_from_this<attempt_round> {
 public:
  attempt_round(const redlock_protocol& kind, const lock_call& c, std::size_t masters,
                net::reply_callback done);
  void start();

 private:
  void on_reply(std::size_t i, std::error_code ec, const reply& r);
  void on_won(std::vector<outcome_type> said, std::int64_t fence);
  void raise_fence(const std::vector<outcome_type>& said, std::int64_t fence);
  void on_fence_raised(std::size_t i, std::error_code ec, const reply& r, std::int64_t fence);
  void miss(const quorum_round& r, const round_error& e) DLOCK_REQUIRES(mutex_);
  void finish(std::error_code ec, reply r);

  const redlock_protocol& kind_;
  const call_copy call_;
  const net::clock::time_point started_;
  const net::clock::time_point node_deadline_;
  const net::clock::time_point cleanup_at_;
  mutex mutex_;  // replies come on the I/O thread while start() may still run on a user thread
  quorum_round round_ DLOCK_GUARDED_BY(mutex_);
  quorum_round fence_round_ DLOCK_GUARDED_BY(mutex_);
  std::vector<outcome_type> said_ DLOCK_GUARDED_BY(mutex_);
  round_error error_ DLOCK_GUARDED_BY(mutex_);
  net::reply_callback done_ DLOCK_GUARDED_BY(mutex_);
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
  std::vector<std::string> names_, owners_;
  std::vector<milliseconds> leases_;
  std::vector<renewal_item> items_;  // pointing into names_ and owners_
  const std::size_t masters_;
  mutex mutex_;
  std::vector<std::size_t> renewed_ DLOCK_GUARDED_BY(mutex_), refused_ DLOCK_GUARDED_BY(mutex_);
  std::size_t answered_ DLOCK_GUARDED_BY(mutex_) = 0;
  net::reply_callback done_ DLOCK_GUARDED_BY(mutex_);
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
  attempt_outcome decode_attempt(const reply& r) const override { return base_.decode_attempt(r); }

  void attempt(const lock_call& c, net::reply_callback done) const override {
    std::make_shared<attempt_round>(*this, c, c.topo.nodes_for(c.names.name).size(),
                                    std::move(done))
        ->start();
  }

  void release(const lock_call& c, net::reply_callback done) const override {
    on_every_master(c, &lock_kind::release, std::move(done));
  }

  void drop(const lock_call& c, net::reply_callback done) const override {
    on_every_master(c, &lock_kind::drop, std::move(done));
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

  const lock_kind& base() const noexcept { return base_; }
  const quorum_timing& timing() const noexcept { return timing_; }
  quorum_counters& counters() const noexcept { return counters_; }
  const script& fence_raise() const noexcept { return fence_raise_; }

 private:
  // A release or a drop on every master: confirmed (the largest count any master returned) when
  // a majority answered with an integer, "not held" (nil) when a majority answered nil,
  // unconfirmed (the first error) otherwise. It waits for every master, each bounded by the
  // node timeout (a master that is down answers at once): a process that exits right after
  // unlock() must not leave its lock on the slower masters until the lease runs out.
  void on_every_master(const lock_call& c,
                       void (lock_kind::*op)(const lock_call&, net::reply_callback) const,
                       net::reply_callback done) const {
    struct state {
      mutex m;
      std::size_t answered DLOCK_GUARDED_BY(m) = 0, released DLOCK_GUARDED_BY(m) = 0,
                           not_held DLOCK_GUARDED_BY(m) = 0;
      std::int64_t largest DLOCK_GUARDED_BY(m) = 0;
      round_error error DLOCK_GUARDED_BY(m);
      net::reply_callback done DLOCK_GUARDED_BY(m);
    };
    const auto nodes = c.topo.nodes_for(c.names.name);
    const auto masters = nodes.size();
    auto st = std::make_shared<state>();
    {
      lock_guard lock(st->m);
      st->done = std::move(done);
    }
    auto deadline = c.deadline;
    if (c.lease > milliseconds(0)) {
      deadline = std::min(deadline, net::clock::now() + timing_.node_timeout(c.lease));
    }
    const lock_call copy{c.topo, 0, c.names, c.owner, c.lease, deadline};
    for (std::size_t i = 0; i < masters; ++i) {
      auto call = copy;
      call.node = nodes[i];
      (base_.*op)(call, [st, masters](std::error_code ec, reply r) {
        net::reply_callback report;
        std::error_code out_ec;
        reply out;
        {
          lock_guard lock(st->m);
          if (ec) {
            st->error.note(ec, r);
          } else if (r.is_integer()) {
            ++st->released;
            st->largest = std::max(st->largest, r.integer());
          } else {
            ++st->not_held;
          }
          if (++st->answered < masters) return;
          const auto needed = majority_of(masters);
          if (st->released >= needed) {
            out = reply::integer(st->largest);
          } else if (st->not_held >= needed) {
            out = reply();  // nil: a majority no longer held it
          } else {
            out_ec = st->error.ec ? st->error.ec : std::error_code(errc::connection_lost);
            out = st->error.server_reply;
          }
          report = std::move(st->done);
        }
        if (report) report(out_ec, std::move(out));
      });
    }
  }

  const lock_kind& base_;
  const quorum_timing timing_;
  quorum_counters& counters_;
  const script fence_raise_{std::string(lua::fence_raise)};
};

// ---- attempt_round ----

attempt_round::attempt_round(const redlock_protocol& kind, const lock_call& c, std::size_t masters,
                             net::reply_callback done)
    : kind_(kind),
      call_{c.topo, c.names, c.owner, c.lease},
      started_(net::clock::now()),
      node_deadline_(std::min(c.deadline, started_ + kind.timing().node_timeout(c.lease))),
      cleanup_at_(cleanup_deadline(c.deadline)),
      round_(masters, started_, c.lease, kind.timing()),
      fence_round_(masters, started_, c.lease, kind.timing()),
      said_(masters, outcome_type::malformed),
      done_(std::move(done)) {}

void attempt_round::start() {
  const auto nodes = call_.topo.nodes_for(call_.names.name);
  auto self = shared_from_this();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    kind_.base().attempt(call_.at(nodes[i], node_deadline_),
                         [self, i](std::error_code ec, reply r) { self->on_reply(i, ec, r); });
  }
}

void attempt_round::on_reply(std::size_t i, std::error_code ec, const reply& r) {
  std::vector<outcome_type> said;
  std::int64_t fence = 0;
  verdict decided;
  {
    lock_guard lock(mutex_);
    const bool was_pending = round_.current() == verdict::pending;
    auto v = vote::unknown;
    std::int64_t value = 0;
    if (ec) {
      error_.note(ec, r);
    } else if (const auto out = kind_.base().decode_attempt(r); out.what == outcome_type::busy) {
      v = vote::no;
      value = out.pttl;
    } else if (out.what == outcome_type::granted || out.what == outcome_type::reentered) {
      v = vote::yes;
      value = static_cast<std::int64_t>(out.fence);
      said_[i] = out.what;
    } else {
      error_.note(errc::unexpected_reply, r);
    }
    if (v == vote::no) said_[i] = outcome_type::busy;
    decided = round_.record(i, v, value, net::clock::now());
    if (!was_pending) {
      // Decided already: a late grant is covered, as the release after a miss (or the one that
      // ends the hold) went out on the same connection behind this attempt.
      kind_.counters().late.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (decided == verdict::pending) return;
    said = said_;
    fence = round_.max_yes_value();
    if (decided == verdict::lost) {
      miss(round_, error_);
      return;
    }
  }
  on_won(std::move(said), fence);
}

void attempt_round::on_won(std::vector<outcome_type> said, std::int64_t fence) {
  const auto reentered = std::count(said.begin(), said.end(), outcome_type::reentered);
  const auto granted = std::count(said.begin(), said.end(), outcome_type::granted);
  if (reentered >= granted) {
    // The owner's hold goes on: its fence was written back when it was first granted.
    finish({}, reply::array({reply::integer(2), reply::integer(fence)}));
    return;
  }
  raise_fence(said, fence);
}

// Before the grant is reported, the largest token its majority drew is written back to a
// majority of the masters it holds: any later majority shares one of them, whose counter then
// already stands at this token, so the later grant's token is larger (docs/redlock.md).
void attempt_round::raise_fence(const std::vector<outcome_type>& said, std::int64_t fence) {
  const auto nodes = call_.topo.nodes_for(call_.names.name);
  {
    lock_guard lock(mutex_);
    for (std::size_t i = 0; i < said.size(); ++i) {
      if (said[i] != outcome_type::granted && said[i] != outcome_type::reentered) {
        fence_round_.record(i, vote::no, 0, started_);  // not ours: cannot carry the token
      }
    }
  }
  const auto token = std::to_string(fence);
  const std::string_view keys[] = {call_.names.fence_key};
  const std::string_view args[] = {token};
  const auto deadline =
      std::min(cleanup_at_, net::clock::now() + kind_.timing().node_timeout(call_.lease));
  auto self = shared_from_this();
  for (std::size_t i = 0; i < said.size(); ++i) {
    if (said[i] != outcome_type::granted && said[i] != outcome_type::reentered) continue;
    kind_.counters().fence_raises.fetch_add(1, std::memory_order_relaxed);
    call_.topo.eval(
        nodes[i], kind_.fence_raise(), keys, args, deadline, durability::master,
        [self, i, fence](std::error_code ec, reply r) { self->on_fence_raised(i, ec, r, fence); });
  }
}

void attempt_round::on_fence_raised(std::size_t i, std::error_code ec, const reply& r,
                                    std::int64_t fence) {
  {
    lock_guard lock(mutex_);
    const bool was_pending = fence_round_.current() == verdict::pending;
    const bool stored = !ec && r.is_integer() && r.integer() >= fence;
    if (ec) error_.note(ec, r);
    const auto decided =
        fence_round_.record(i, stored ? vote::yes : vote::unknown, 0, net::clock::now());
    if (!was_pending || decided == verdict::pending) return;
    if (decided == verdict::lost) {
      miss(fence_round_, error_);
      return;
    }
  }
  finish({}, reply::array({reply::integer(1), reply::integer(fence)}));
}

// After a miss, every master is released, those that did not answer too (the attempt may have
// run there after all; the release goes out behind it on the same connection). A re-entry
// undoes only its own count where it re-entered, and leaves the owner's other holds alone.
//
// The miss is reported once the masters that answered have confirmed their release: a caller
// that gives up and exits at once must not leave its grants behind, and one that retries must
// not find them in its way. Masters that did not answer are not waited for.
//
// What is reported: busy, with when a majority may be free (0: at once, after the caller's
// jitter; -1: unknown, the caller re-checks on its own rhythm or when an unlock message comes).
// Masters down or slow are part of what RedLock rides out, so a miss they caused is "not
// acquired" too; only an error waiting cannot fix (a wrong type, a permission) that kept the
// majority out of reach is reported as such.
void attempt_round::miss(const quorum_round& r, const round_error& e) {
  kind_.counters().misses.fetch_add(1, std::memory_order_relaxed);
  const bool errors_mattered = r.count(vote::no) <= r.masters() - r.needed();
  std::error_code ec;
  reply out;
  if (e.ec && errors_mattered && !transient(e.ec)) {
    ec = e.ec;
    out = e.server_reply;
  } else {
    out = reply::array({reply::integer(0), reply::integer(r.wait_for_majority_ms())});
  }
  struct pending_report {
    net::io_thread& io;
    net::reply_callback done;
    std::error_code ec;
    reply out;
    std::size_t releases = 1;  // one for the loop below, so the report cannot leave early
    void one_done() {
      if (--releases > 0) return;
      // Posted: the last release may complete inline (a closed client) while the round's
      // mutex is held, and `done` may send the next attempt.
      io.post([done = std::move(done), ec = ec, out = std::move(out)]() mutable {
        if (done) done(ec, std::move(out));
      });
    }
  };
  auto report = std::make_shared<pending_report>(
      pending_report{call_.topo.io(), std::move(done_), ec, std::move(out)});
  const bool reentry = std::count(said_.begin(), said_.end(), outcome_type::reentered) > 0;
  const auto nodes = call_.topo.nodes_for(call_.names.name);
  for (std::size_t i = 0; i < said_.size(); ++i) {
    const auto c = call_.at(nodes[i], cleanup_at_);
    const bool answered = said_[i] != outcome_type::malformed;
    net::reply_callback confirmed = [](std::error_code, reply) {};
    if (answered) {
      ++report->releases;
      confirmed = [report](std::error_code, reply) { report->one_done(); };
    }
    if (said_[i] == outcome_type::reentered) {
      kind_.base().release(c, std::move(confirmed));
    } else if (said_[i] == outcome_type::granted || !reentry) {
      kind_.base().drop(c, std::move(confirmed));
    } else if (answered) {
      report->one_done();
    }
  }
  report->one_done();
}

void attempt_round::finish(std::error_code ec, reply r) {
  net::reply_callback done;
  {
    lock_guard lock(mutex_);
    done = std::move(done_);
  }
  if (done) done(ec, std::move(r));
}

// ---- renewal_round ----

renewal_round::renewal_round(const redlock_protocol& kind, topology& t,
                             std::span<const renewal_item> items, std::size_t masters,
                             net::reply_callback done)
    : kind_(kind), topo_(t), masters_(masters) {
  for (const auto& item : items) {
    names_.push_back(*item.name);
    owners_.push_back(*item.owner);
    leases_.push_back(item.lease);
  }
  for (std::size_t i = 0; i < names_.size(); ++i)
    items_.push_back({&names_[i], &owners_[i], leases_[i]});
  lock_guard lock(mutex_);
  renewed_.assign(items_.size(), 0);
  refused_.assign(items_.size(), 0);
  done_ = std::move(done);
}

void renewal_round::start(net::clock::time_point deadline) {
  if (items_.empty() || masters_ == 0) {
    net::reply_callback done;
    {
      lock_guard lock(mutex_);
      done = std::move(done_);
    }
    if (done) done({}, reply::array({}));
    return;
  }
  const auto nodes = topo_.nodes_for(names_.front());
  auto self = shared_from_this();
  for (const auto node : nodes) {
    kind_.base().renew(topo_, node, items_, deadline,
                       [self](std::error_code ec, reply r) { self->on_reply(ec, r); });
  }
}

void renewal_round::on_reply(std::error_code ec, const reply& r) {
  std::vector<reply> verdicts;
  std::vector<std::size_t> lost;
  net::reply_callback done;
  {
    lock_guard lock(mutex_);
    // A master that failed, or answered something else, counts as neither.
    if (!ec && r.is_array() && r.elements().size() == items_.size()) {
      for (std::size_t k = 0; k < items_.size(); ++k) {
        const auto& v = r.elements()[k];
        (v.is_integer() && v.integer() == 1 ? renewed_[k] : refused_[k]) += 1;
      }
    }
    if (++answered_ < masters_) return;
    const auto needed = majority_of(masters_);
    for (std::size_t k = 0; k < items_.size(); ++k) {
      if (renewed_[k] >= needed) {
        verdicts.push_back(reply::integer(1));
      } else if (refused_[k] > masters_ - needed) {
        verdicts.push_back(reply::integer(0));
        lost.push_back(k);
      } else {
        verdicts.push_back(reply::integer(renewal_undecided));
      }
    }
    done = std::move(done_);
  }
  // A hold a majority no longer has is lost; the masters that did extend it let it go now
  // rather than when their extension runs out.
  const auto nodes = topo_.nodes_for(names_.front());
  for (const auto k : lost) {
    const lock_names names(names_[k]);
    for (const auto node : nodes) {
      kind_.base().drop({topo_, node, names, owners_[k], leases_[k], cleanup_deadline({})},
                        [](std::error_code, reply) {});
    }
  }
  if (done) done({}, reply::array(std::move(verdicts)));
}

}  // namespace

std::unique_ptr<lock_kind> make_redlock_kind(const lock_kind& base, quorum_timing timing,
                                             quorum_counters& counters) {
  return std::make_unique<redlock_protocol>(base, timing, counters);
}

}  // namespace dlock::detail
