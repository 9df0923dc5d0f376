// RedLock's acquisition round: one attempt on every master at once, decided by quorum_round;
// the fence write-back after a win, the releases after a miss.
#include <utility>

#include "locks/kinds/redlock_rounds.hpp"

namespace dlock::detail::redlock_rounds {

// ---- attempt_round ----

attempt_round::attempt_round(const redlock_protocol& kind, const lock_call& c, std::size_t masters,
                             net::reply_callback done)
    : kind_(kind),
      call_{c.topo, c.names, c.owner, c.lease, std::string(c.identity)},
      holds_already_(c.holds_already),
      started_(net::clock::now()),
      node_deadline_(std::min(c.deadline, started_ + kind.timing().node_timeout(c.lease))),
      cleanup_at_(cleanup_deadline(c.deadline)),
      round_(masters, started_, c.lease, kind.timing()),
      fence_round_(masters, started_, c.lease, kind.timing()),
      said_(masters, outcome_type::malformed),
      drawn_(masters, 0),
      done_(std::move(done)) {}

// The attempts leave one master at a time, and from a caller's thread the first replies can be
// in before the last attempt is sent. What a decision sends next (a miss's releases, a winner's
// release through its callback) must reach every master behind that master's attempt, on the
// same connection, or it could overtake the attempt there and leave its grant behind: so a
// decision taken while attempts are still being sent is acted on once they all are.
void attempt_round::start() {
  const auto nodes = call_.topo.nodes_for(call_.names.name);
  auto self = shared_from_this();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    kind_.base().attempt(call_.at(nodes[i], node_deadline_),
                         [self, i](std::error_code ec, reply r) { self->on_reply(i, ec, r); });
  }
  {
    lock_guard lock(mutex_);
    sending_ = false;
    if (!std::exchange(deferred_, false)) return;
  }
  // Replies, and all that follows them (the caller's callback among it), run on the I/O thread.
  call_.topo.io().post([self] {
    won_round won;
    {
      lock_guard lock(self->mutex_);
      if (!self->act_on_decision(won)) return;
    }
    self->on_won(std::move(won.said), won.drawn, won.fence);
  });
}

bool attempt_round::act_on_decision(won_round& won) {
  if (round_.current() == verdict::lost) {
    miss(round_, error_);
    return false;
  }
  won = {said_, drawn_, round_.max_yes_value()};
  return true;
}

void attempt_round::on_reply(std::size_t i, std::error_code ec, const reply& r) {
  won_round won;
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
      drawn_[i] = value;
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
    if (sending_) {
      deferred_ = true;  // start() acts on it (its comment says why)
      return;
    }
    if (!act_on_decision(won)) return;
  }
  on_won(std::move(won.said), won.drawn, won.fence);
}

void attempt_round::on_won(std::vector<outcome_type> said, const std::vector<std::int64_t>& drawn,
                           std::int64_t fence) {
  if (is_reentry(holds_already_, said)) {
    // The owner's hold goes on: its fence stood on a majority when it was first granted.
    finish({}, reply::array({reply::integer(2), reply::integer(fence)}));
    return;
  }
  // A fresh grant that some master counted as a re-entry: that master kept a stale hold of this
  // owner's (is_reentry). Take the extra count back, so that the hold there is this grant's
  // alone and the release leaves nothing behind.
  const auto nodes = call_.topo.nodes_for(call_.names.name);
  for (std::size_t i = 0; i < said.size(); ++i) {
    if (said[i] == outcome_type::reentered) {
      kind_.base().release(call_.at(nodes[i], cleanup_at_), [](std::error_code, reply) {});
    }
  }
  raise_fence(said, drawn, fence);
}

// Before the grant is reported, the largest token its majority drew must stand on a majority of
// the masters it holds: any later majority shares one of them, whose counter then already
// stands at this token, so the later grant's token is larger (docs/redlock.md). A master that
// drew the token itself in this grant has it already (the counter only grows); the others are
// raised to it. When the masters' counters are level, as they are once a name's grants have
// been written back, every master draws the same token and the grant needs no write-back: one
// round trip instead of two.
void attempt_round::raise_fence(const std::vector<outcome_type>& said,
                                const std::vector<std::int64_t>& drawn, std::int64_t fence) {
  const auto nodes = call_.topo.nodes_for(call_.names.name);
  std::vector<std::size_t> to_raise;
  verdict decided;
  {
    lock_guard lock(mutex_);
    const auto now = net::clock::now();
    for (std::size_t i = 0; i < said.size(); ++i) {
      if (said[i] != outcome_type::granted && said[i] != outcome_type::reentered) {
        fence_round_.record(i, vote::no, 0, started_);  // not ours: cannot carry the token
      }
    }
    for (std::size_t i = 0; i < said.size(); ++i) {
      // A master that counted a re-entry kept an older hold of this owner's, not this grant's
      // (on_won): it is raised whatever it read, as the argument in docs/redlock.md covers.
      if (said[i] == outcome_type::granted && drawn[i] == fence) {
        fence_round_.record(i, vote::yes, 0, now);
      } else if (said[i] == outcome_type::granted || said[i] == outcome_type::reentered) {
        to_raise.push_back(i);
      }
    }
    decided = fence_round_.check(now);
    if (decided == verdict::lost) {
      miss(fence_round_, error_);
      return;
    }
  }
  // Raised even when the grant stands already, so that the counters are level for the name's
  // next grant; answers after the decision change nothing.
  const auto token = std::to_string(fence);
  const std::string_view keys[] = {call_.names.fence_key};
  const std::string_view args[] = {token};
  const auto deadline =
      std::min(cleanup_at_, net::clock::now() + kind_.timing().node_timeout(call_.lease));
  auto self = shared_from_this();
  for (const auto i : to_raise) {
    kind_.counters().fence_raises.fetch_add(1, std::memory_order_relaxed);
    call_.topo.eval(
        nodes[i], kind_.fence_raise(), keys, args, deadline, durability::master,
        [self, i, fence](std::error_code ec, reply r) { self->on_fence_raised(i, ec, r, fence); });
  }
  if (decided == verdict::won) finish({}, reply::array({reply::integer(1), reply::integer(fence)}));
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
// undoes only its own count, and leaves the owner's other holds alone.
//
// The miss is reported once the masters have confirmed their release: a caller that gives up and
// exits at once must not leave its grants behind, and one that retries must not find them in its
// way.
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
  const auto wait_ms = r.wait_for_majority_ms();
  if (e.ec && errors_mattered && !transient(e.ec)) {
    ec = e.ec;
    out = e.server_reply;
  } else {
    out = reply::array({reply::integer(0), reply::integer(wait_ms)});
  }
  // Our partial grants are announced only when a majority may be free now (a split vote: the
  // other contenders should retry). When a holder elsewhere or masters that are down keep the
  // majority out of reach, the announcement would only wake waiters, ourselves first, into
  // another attempt that cannot succeed.
  const bool announce = wait_ms == 0;
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
  const bool reentry = is_reentry(holds_already_, said_);
  const auto nodes = call_.topo.nodes_for(call_.names.name);
  // A master that did not answer in time may still have run the attempt: its release is waited
  // for too, but only for another node timeout (a master that is down answers at once).
  const auto unanswered_until = net::clock::now() + kind_.timing().node_timeout(call_.lease);
  for (std::size_t i = 0; i < said_.size(); ++i) {
    const bool answered = said_[i] != outcome_type::malformed;
    const auto c = call_.at(nodes[i], answered ? cleanup_at_ : unanswered_until);
    ++report->releases;
    net::reply_callback confirmed = [report](std::error_code, reply) { report->one_done(); };
    if (!reentry) {
      // The drop ends whatever the attempt may have left; one that a master's down connection
      // could not take goes there when it is back.
      confirmed = [report, self = shared_from_this(), node = nodes[i]](std::error_code dropped,
                                                                       reply) {
        if (dropped == errc::connection_lost) self->kind_.drop_when_back(self->call_, node);
        report->one_done();
      };
    }
    if (reentry) {
      // Undoes this attempt's count wherever it may have run: a re-entry, a fresh hold, or
      // nothing (a master where the owner holds nothing answers nil).
      kind_.base().release(c, std::move(confirmed));
    } else if (announce) {
      kind_.base().drop(c, std::move(confirmed));
    } else {
      kind_.base().drop_quietly(c, std::move(confirmed));
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
}  // namespace dlock::detail::redlock_rounds
