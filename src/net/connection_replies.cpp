// What comes back on a connection: its replies, read and handed to their callers in order, and
// the timers that end what does not come back (a command's deadline, a stalled connection, a
// silent pub/sub connection).
#include <algorithm>
#include <vector>

#include "dlock/error.hpp"
#include "net/connection.hpp"

namespace dlock::net {

// ---- reading ----

void connection::start_read() {
  auto room = parser_.prepare(16 * 1024);
  transport_->async_read_some(asio::buffer(room.data(), room.size()),
                              [this, e = epoch_](std::error_code ec, std::size_t n) {
                                if (e != epoch_) return;
                                if (ec) {
                                  connection_failed(errc::connection_lost);
                                  return;
                                }
                                parser_.commit(n);
                                on_bytes_read();
                                if (e == epoch_) start_read();
                              });
}

// Replies wake their callers, who promptly submit again. While this thread hands out a batch of
// replies it holds the writer's role (if free), so those submissions gather in the outbox and
// leave in one write at the end instead of one send each.
void connection::on_bytes_read() {
  const auto e = epoch_;
  last_read_at_ = clock::now();
  ping_sent_ = false;
  bool holding = false;
  if (mode_ == mode::commands && state_ == state::ready) {
    detail::lock_guard lock(mutex_);
    holding = !std::exchange(writer_active_, true);
  }
  reply r;
  for (;;) {
    const auto status = parser_.next(r);
    if (status == wire::resp_parser::status::need_more) break;
    if (status == wire::resp_parser::status::error) {
      connection_failed(errc::protocol_error);
      return;
    }
    dispatch(std::move(r));
    if (e != epoch_) return;  // the reply's handler failed or closed the connection
  }
  // The write waits for the handlers the replies queued on this thread (an asynchronous
  // caller's next acquisition is started by one), so that what they submit leaves in it too.
  if (holding || std::exchange(write_deferred_, false)) {
    io_.post([this, e] {
      if (e == epoch_) start_write(true);
    });
  }
}

void connection::dispatch(reply&& r) {
  if (state_ == state::connecting) {
    on_handshake_reply(std::move(r));
    return;
  }
  if (mode_ == mode::pubsub) {
    if (push_handler_) push_handler_(std::move(r));
    return;
  }
  counters_.replies.fetch_add(1, std::memory_order_relaxed);
  pending p;
  std::size_t others_in_flight = 0;
  {
    detail::unique_lock lock(mutex_);
    if (inflight_.empty()) {
      lock.unlock();
      connection_failed(errc::protocol_error);  // a reply nobody asked for: the stream is corrupt
      return;
    }
    p = std::move(inflight_.front());
    inflight_.pop_front();
    others_in_flight = inflight_.size();
  }
  io_.note_reply(last_read_at_ - p.written, others_in_flight);
  if (p.finished) return;
  if (r.is_error()) {
    if (p.eval_script && r.str().starts_with("NOSCRIPT")) {
      // The server forgot it (SCRIPT FLUSH) without a reconnect. This retry goes out behind
      // whatever was submitted since: the one case where calls may run out of order.
      {
        detail::lock_guard lock(mutex_);
        loaded_scripts_.erase(p.eval_script->sha1());
      }
      resend_as_eval(std::move(p));
      return;
    }
    const auto ec = classify_error_reply(r.str());
    p.done(ec, std::move(r));
    return;
  }
  p.done({}, std::move(r));
}

// ---- deadlines ----

void connection::arm_deadline_timer() {
  clock::time_point at;
  {
    detail::lock_guard lock(mutex_);
    at = timer_at_;
  }
  if (at == clock::time_point::max() || state_ == state::closed || at == armed_at_) return;
  armed_at_ = at;
  deadline_timer_.expires_at(at);
  deadline_timer_.async_wait([this](std::error_code ec) {
    if (ec) return;
    armed_at_ = clock::time_point::max();
    on_deadline_timer();
  });
}

// Expires commands whose deadline has passed, and gives up on a connection that has been silent
// for a whole command timeout (or the oldest command's own, if longer) while a reply is due: a
// half-open connection (the server's host gone without a FIN or RST) would otherwise swallow
// every command forever, each failing alone by its timeout.
void connection::on_deadline_timer() {
  const auto now = clock::now();
  std::vector<reply_callback> expired;
  auto next = clock::time_point::max();
  bool stalled = false;
  auto sweep = [&](std::deque<pending>& queue) {
    for (auto& p : queue) {
      if (p.finished) continue;
      if (p.deadline <= now) {
        p.finished = true;
        expired.push_back(std::move(p.done));
      } else {
        next = std::min(next, p.deadline);
      }
    }
  };
  {
    detail::lock_guard lock(mutex_);
    sweep(outbox_pending_);
    sweep(inflight_);
    if (mode_ == mode::commands && state_ == state::ready && !inflight_.empty()) {
      const auto& oldest = inflight_.front();
      const auto limit =
          std::max<clock::duration>(options_.command_timeout, oldest.deadline - oldest.written);
      const auto stall_at = std::max(last_read_at_, oldest.written) + limit;
      // A command that expires after a default timeout of silence expires a hair before the
      // stall is due (it was submitted before it was written): judged together, so that the
      // connection is dropped before its callers hear of the timeout (below).
      const auto hair = expired.empty() ? clock::duration::zero() : options_.command_timeout / 64;
      stalled = now + hair >= stall_at;
      if (!stalled) next = std::min(next, stall_at);
    }
    timer_at_ = next;
  }
  arm_deadline_timer();
  // A stalled connection is dropped before the expired callers hear of their timeouts: a caller
  // that sends again at once then waits for the reconnect, instead of writing to a connection
  // about to fail everything in flight with connection_lost.
  if (stalled && state_ == state::ready) connection_failed(errc::connection_lost);
  counters_.timeouts.fetch_add(expired.size(), std::memory_order_relaxed);
  for (auto& done : expired)
    done(errc::timeout, {});
}

// Pub/sub connections carry no replies to wait for: after a command timeout of silence they send
// a PING, and a second one without a byte back means the connection is dead.
void connection::arm_keepalive() {
  if (mode_ != mode::pubsub || state_ != state::ready) return;
  keepalive_timer_.expires_at(last_read_at_ + (ping_sent_ ? 2 : 1) * options_.command_timeout);
  keepalive_timer_.async_wait([this, e = epoch_](std::error_code ec) {
    if (ec || e != epoch_ || state_ != state::ready) return;
    const auto silent = clock::now() - last_read_at_;
    if (silent >= 2 * options_.command_timeout) {
      connection_failed(errc::connection_lost);
      return;
    }
    if (silent >= options_.command_timeout && !ping_sent_) {
      ping_sent_ = true;
      static constexpr std::string_view ping = "*1\r\n$4\r\nPING\r\n";
      send_raw(ping);
    }
    arm_keepalive();
  });
}

}  // namespace dlock::net
