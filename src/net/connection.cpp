#include "net/connection.hpp"

#include <sys/socket.h>
#include <algorithm>
#include <asio/error.hpp>
#include <cerrno>
#include <charconv>

#include "dlock/error.hpp"

namespace dlock::net {

std::error_code classify_error_reply(std::string_view text) {
  // Errors a script's redis.call raised reach us with the same code in front (Redis 7), and a
  // script's own errors follow the same convention.
  const auto code = text.substr(0, text.find(' '));
  if (code == "NOAUTH" || code == "WRONGPASS") return errc::auth_failed;
  if (code == "WRONGTYPE") return errc::wrong_type;
  if (code == "NOPERM") return errc::permission_denied;
  // An ACL refusal inside a script comes back as a plain ERR (Redis 7.0).
  if (code == "ERR" && text.find("The user executing the script can't") != text.npos) {
    return errc::permission_denied;
  }
  if (code == "READONLY") return errc::read_only;
  if (code == "LOADING" || code == "BUSY" || code == "TRYAGAIN" || code == "MASTERDOWN" ||
      code == "CLUSTERDOWN") {
    return errc::server_busy;
  }
  return errc::server_error;
}

connection::connection(io_thread& io, const connection_options& options,
                       std::shared_ptr<asio::ssl::context> tls, mode m)
    : io_(io),
      options_(options),
      tls_(std::move(tls)),
      mode_(m),
      connect_timer_(io.context()),
      retry_timer_(io.context()),
      deadline_timer_(io.context()),
      jitter_(std::random_device{}()) {}

connection::~connection() {
  close(errc::client_closed);
}

void connection::note_deadline_locked(clock::time_point deadline, bool& rearm) {
  if (deadline < timer_at_) {
    timer_at_ = deadline;
    rearm = true;
  }
}

// Appends one command to the outbox, or fails it at once if the connection is closed. If no one
// is writing, this thread becomes the writer: it sends directly when the connection is idle and
// it can, else hands the job to the I/O thread. If a writer is active, it picks these bytes up
// in its next round.
template <class Encode>
void connection::enqueue(pending&& p, Encode&& encode) {
  bool become_writer = false;
  bool idle = false;
  bool rearm = false;
  {
    std::unique_lock lock(mutex_);
    if (closed_) {
      const auto reason = close_reason_;
      lock.unlock();
      p.done(reason, {});
      return;
    }
    encode(outbox_);
    note_deadline_locked(p.deadline, rearm);
    outbox_pending_.push_back(std::move(p));
    become_writer = !std::exchange(writer_active_, true);
    idle = inflight_.empty();
  }
  if (rearm) io_.post([this] { arm_deadline_timer(); });
  // Sending from here saves a wake-up of the I/O thread, which matters when the connection is
  // idle (one caller: latency). When replies are outstanding the I/O thread is awake anyway, and
  // letting it write gathers everything the woken callers submit into one write (throughput).
  if (become_writer && (!idle || io_.in_io_thread() || !write_directly())) {
    io_.post([this] { start_write(); });
  }
}

std::size_t connection::move_outbox_to_inflight_locked() {
  const std::size_t count = outbox_pending_.size();
  if (inflight_.empty()) {
    inflight_.swap(outbox_pending_);
  } else {
    for (auto& p : outbox_pending_)
      inflight_.push_back(std::move(p));
    outbox_pending_.clear();
  }
  return count;
}

// The submitting thread, now the writer, sends the outbox itself with non-blocking send(2):
// a few rounds at most, so it soon goes back to wait for its own reply. Returns false if the
// I/O thread must take over (no plain socket, or rounds used up with more queued).
bool connection::write_directly() {
  std::lock_guard socket(socket_mutex_);
  if (direct_fd_ < 0) return false;
  for (int round = 0; round < 4; ++round) {
    std::size_t count = 0;
    {
      std::lock_guard lock(mutex_);
      if (outbox_.empty()) {
        writer_active_ = false;
        return true;
      }
      std::swap(outbox_, direct_buffer_);
      count = move_outbox_to_inflight_locked();
    }
    counters_.writes.fetch_add(1, std::memory_order_relaxed);
    counters_.commands_sent.fetch_add(count, std::memory_order_relaxed);
    std::size_t sent = 0;
    while (sent < direct_buffer_.size()) {
      const auto n = ::send(direct_fd_, direct_buffer_.data() + sent, direct_buffer_.size() - sent,
                            MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      const auto epoch = direct_epoch_;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        // The socket buffer is full: the I/O thread sends the rest when it drains, and stays
        // the writer.
        std::string rest = direct_buffer_.substr(sent);
        direct_buffer_.clear();
        io_.post([this, rest = std::move(rest), epoch]() mutable {
          write_rest(std::move(rest), epoch);
        });
        return true;
      }
      // Broken: the I/O thread fails what is in flight and reconnects.
      direct_buffer_.clear();
      io_.post([this, epoch] {
        if (epoch == epoch_) connection_failed(errc::connection_lost);
      });
      return true;
    }
    direct_buffer_.clear();
  }
  return false;
}

void connection::write_rest(std::string rest, std::uint64_t epoch) {
  if (epoch != epoch_ || state_ != state::ready) return;  // that connection is gone
  write_buffer_ = std::move(rest);
  send_write_buffer();
}

// Sends write_buffer_ from the I/O thread, the writer. When it is on the wire, the next round
// takes what was queued meanwhile, but not at once: the handlers already queued (replies, whose
// callers are about to submit more) run first, so the next write carries everything they add.
// Pipelining without a timer.
void connection::send_write_buffer() {
  writing_ = true;
  transport_->async_write(asio::buffer(write_buffer_),
                          [this, e = epoch_](std::error_code ec, std::size_t) {
                            if (e != epoch_) return;
                            writing_ = false;
                            write_buffer_.clear();
                            if (ec) {
                              connection_failed(errc::connection_lost);
                              return;
                            }
                            io_.post([this, e] {
                              if (e == epoch_) start_write();
                            });
                          });
}

void connection::forget_socket() {
  std::lock_guard socket(socket_mutex_);
  direct_fd_ = -1;
}

void connection::submit(std::span<const std::string_view> args, clock::time_point deadline,
                        reply_callback done) {
  enqueue(pending{std::move(done), deadline, nullptr, {}, 0, false},
          [&](std::string& out) { wire::encode_command(out, args); });
}

void connection::submit_eval(const script& s, std::span<const std::string_view> keys,
                             std::span<const std::string_view> args, clock::time_point deadline,
                             reply_callback done) {
  // "numkeys keys... args..." is kept, encoded, to re-send as EVAL after a NOSCRIPT. `encode`
  // reads it from `p` before `enqueue` moves `p` into the queue.
  pending p{std::move(done), deadline, s.shared_body(), {}, 1 + keys.size() + args.size(), false};
  char numkeys[24];
  const auto numkeys_len =
      std::to_chars(numkeys, numkeys + sizeof numkeys, keys.size()).ptr - numkeys;
  wire::encode_bulk(p.eval_tail, std::string_view(numkeys, numkeys_len));
  for (auto k : keys)
    wire::encode_bulk(p.eval_tail, k);
  for (auto a : args)
    wire::encode_bulk(p.eval_tail, a);
  const std::string& tail = p.eval_tail;
  const std::size_t count = 2 + p.eval_tail_count;
  enqueue(std::move(p), [&](std::string& out) {
    wire::encode_array_header(out, count);
    wire::encode_bulk(out, "EVALSHA");
    wire::encode_bulk(out, s.sha1());
    out += tail;
  });
}

void connection::send_raw(std::string_view bytes) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    outbox_ += bytes;
    writer_active_ = true;
  }
  start_write();
}

void connection::resend_as_eval(pending&& p) {
  counters_.noscript_retries.fetch_add(1, std::memory_order_relaxed);
  auto body = std::move(p.eval_script);  // retried once: EVAL cannot answer NOSCRIPT
  const std::string tail = std::move(p.eval_tail);
  const std::size_t count = 2 + p.eval_tail_count;
  enqueue(std::move(p), [&](std::string& out) {
    wire::encode_array_header(out, count);
    wire::encode_bulk(out, "EVAL");
    wire::encode_bulk(out, body->source);
    out += tail;
  });
}

// ---- connecting ----

void connection::start(attempt_callback first_attempt) {
  first_attempt_ = std::move(first_attempt);
  begin_attempt();
}

void connection::begin_attempt() {
  if (state_ == state::closed) return;
  ++epoch_;
  state_ = state::connecting;
  parser_.reset();
  transport_ = make_transport(io_.context(), options_, tls_);
  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait([this, e = epoch_](std::error_code ec) {
    if (ec || e != epoch_ || state_ != state::connecting) return;
    std::string what = "timed out after " + std::to_string(options_.connect_timeout.count()) +
                       " ms connecting to " + options_.redacted_url();
    if (transport_->in_tls_handshake()) {
      what +=
          ": the server accepted the connection but never answered the TLS handshake (a "
          "plaintext Redis port? use redis:// there, or the server's tls-port)";
    }
    attempt_failed(errc::connect_failed, what);
  });
  transport_->async_connect([this, e = epoch_](std::error_code ec, std::string detail) {
    if (e != epoch_) return;
    if (ec) {
      attempt_failed(ec, detail);
      return;
    }
    on_transport_connected();
  });
}

void connection::on_transport_connected() {
  std::string hello;
  handshake_replies_left_ = 0;
  handshake_replies_seen_ = 0;
  if (!options_.password.empty() || !options_.user.empty()) {
    if (options_.user.empty()) {
      const std::string_view args[] = {"AUTH", options_.password};
      wire::encode_command(hello, args);
    } else {
      const std::string_view args[] = {"AUTH", options_.user, options_.password};
      wire::encode_command(hello, args);
    }
    ++handshake_replies_left_;
  }
  if (options_.database != 0) {
    const std::string db = std::to_string(options_.database);
    const std::string_view args[] = {"SELECT", db};
    wire::encode_command(hello, args);
    ++handshake_replies_left_;
  }
  {
    const std::string name = options_.client_name.empty() ? "dlock" : options_.client_name;
    const std::string_view args[] = {"CLIENT", "SETNAME", name};
    wire::encode_command(hello, args);
    ++handshake_replies_left_;
  }
  start_read();
  write_buffer_ = std::move(hello);
  send_write_buffer();
}

void connection::on_handshake_reply(reply&& r) {
  // CLIENT SETNAME is last. Naming is cosmetic: a restricted ACL user may not be allowed to do
  // it, and that must not keep it from connecting, unless the user asked for a name.
  const bool setname_reply = handshake_replies_left_ == 1;
  if (r.is_error() && setname_reply && options_.client_name.empty() &&
      r.str().starts_with("NOPERM")) {
    r = reply::simple_string("OK");
  }
  if (r.is_error()) {
    // The first handshake reply answers AUTH when credentials were given; any failure there is
    // an authentication failure whatever the server's wording.
    const bool sent_auth = !options_.password.empty() || !options_.user.empty();
    const bool is_auth_reply = sent_auth && handshake_replies_seen_ == 0;
    const std::error_code ec =
        is_auth_reply ? make_error_code(errc::auth_failed) : classify_error_reply(r.str());
    attempt_failed(ec,
                   "connection handshake with " + options_.redacted_url() + " failed: " + r.str());
    return;
  }
  ++handshake_replies_seen_;
  if (--handshake_replies_left_ == 0) became_ready();
}

void connection::became_ready() {
  connect_timer_.cancel();
  state_ = state::ready;
  up_ = true;
  backoff_ = std::chrono::milliseconds(0);
  if (ever_connected_) counters_.reconnects.fetch_add(1, std::memory_order_relaxed);
  ever_connected_ = true;
  if (ready_handler_) ready_handler_();
  if (first_attempt_) std::exchange(first_attempt_, nullptr)({}, {});
  if (state_ != state::ready) return;
  // Commands queued during the reconnect go out first, from here (unless a writer is already
  // active: its posted start_write will). Only then may submitting threads write directly, so
  // two writers never interleave their bytes.
  bool take_over = false;
  {
    std::lock_guard lock(mutex_);
    take_over = !std::exchange(writer_active_, true);
  }
  if (take_over) start_write();
  if (mode_ == mode::commands) {
    std::lock_guard socket(socket_mutex_);
    direct_fd_ = transport_->native_handle();
    direct_epoch_ = epoch_;
  }
}

void connection::attempt_failed(std::error_code ec, const std::string& detail) {
  ++epoch_;
  connect_timer_.cancel();
  forget_socket();
  if (transport_) transport_->close();
  writing_ = false;
  write_buffer_.clear();
  if (state_ == state::closed) return;
  state_ = state::backoff;
  if (first_attempt_) std::exchange(first_attempt_, nullptr)(ec, detail);
  schedule_reconnect();
}

void connection::connection_failed(std::error_code ec) {
  if (state_ == state::connecting) {
    const std::string detail =
        ec == errc::protocol_error
            ? "protocol error from " + options_.redacted_url() + ": " + parser_.error_message()
            : "connection to " + options_.redacted_url() +
                  " dropped during the handshake: " + ec.message();
    attempt_failed(ec == errc::protocol_error ? ec : make_error_code(errc::connect_failed), detail);
    return;
  }
  if (state_ != state::ready) return;
  ++epoch_;
  up_ = false;
  forget_socket();
  transport_->close();
  state_ = state::backoff;
  writing_ = false;
  write_deferred_ = false;
  write_buffer_.clear();
  counters_.connection_losses.fetch_add(1, std::memory_order_relaxed);
  // Everything the callers were waiting on at the moment of the drop fails now, whether it had
  // reached the socket or not: a caller should not have to guess which of its commands will
  // still run later. (Subscriptions are re-sent in full by the ready handler.) Commands issued
  // from now on wait for the reconnect, up to their own deadlines.
  std::deque<pending> failed;
  {
    std::lock_guard lock(mutex_);
    failed.swap(inflight_);
    writer_active_ = false;
    outbox_.clear();
    for (auto& p : outbox_pending_)
      failed.push_back(std::move(p));
    outbox_pending_.clear();
  }
  for (auto& p : failed) {
    if (!p.finished) p.done(errc::connection_lost, {});
  }
  schedule_reconnect();
}

void connection::schedule_reconnect() {
  if (state_ == state::closed) return;
  auto delay = backoff_;
  backoff_ = backoff_.count() == 0 ? options_.reconnect_min
                                   : std::min(backoff_ * 2, options_.reconnect_max);
  if (delay.count() > 0) {
    // Jitter spreads out the reconnects of many clients after a server restart.
    std::uniform_int_distribution<std::int64_t> spread(delay.count() / 2, delay.count());
    delay = std::chrono::milliseconds(spread(jitter_));
  }
  retry_timer_.expires_after(delay);
  retry_timer_.async_wait([this](std::error_code ec) {
    if (ec || state_ != state::backoff) return;
    begin_attempt();
  });
}

void connection::close(std::error_code reason) {
  if (state_ == state::closed) return;
  state_ = state::closed;
  up_ = false;
  ++epoch_;
  connect_timer_.cancel();
  retry_timer_.cancel();
  deadline_timer_.cancel();
  forget_socket();
  if (transport_) transport_->close();
  std::deque<pending> failed;
  {
    std::lock_guard lock(mutex_);
    failed.swap(inflight_);
    closed_ = true;
    close_reason_ = reason;
    outbox_.clear();
    for (auto& p : outbox_pending_)
      failed.push_back(std::move(p));
    outbox_pending_.clear();
  }
  for (auto& p : failed) {
    if (!p.finished) p.done(reason, {});
  }
  if (first_attempt_) std::exchange(first_attempt_, nullptr)(reason, "connection closed");
}

// ---- reading and writing ----

void connection::start_write(bool flush_small) {
  std::size_t count = 0;
  {
    std::lock_guard lock(mutex_);
    if (state_ != state::ready) {
      writer_active_ = false;
      return;
    }
    if (writing_) return;  // the write in flight calls us again when it completes
    if (outbox_.empty()) {
      writer_active_ = false;
      return;
    }
    // Many replies are on their way, and each will wake a caller who adds a command: a handful
    // of commands can wait for them and leave together at the end of the next batch of replies
    // (on_bytes_read) rather than in a write each. With few callers nothing waits: latency first.
    constexpr std::size_t small_batch = 4;
    constexpr std::size_t busy = 8;
    if (!flush_small && mode_ == mode::commands && outbox_pending_.size() < small_batch &&
        inflight_.size() >= busy) {
      write_deferred_ = true;  // and we stay the writer
      return;
    }
    std::swap(outbox_, write_buffer_);
    count = move_outbox_to_inflight_locked();
  }
  counters_.writes.fetch_add(1, std::memory_order_relaxed);
  counters_.commands_sent.fetch_add(count, std::memory_order_relaxed);
  send_write_buffer();
}

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
  bool holding = false;
  if (mode_ == mode::commands && state_ == state::ready) {
    std::lock_guard lock(mutex_);
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
  if (holding || std::exchange(write_deferred_, false)) start_write(true);
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
  {
    std::unique_lock lock(mutex_);
    if (inflight_.empty()) {
      lock.unlock();
      connection_failed(errc::protocol_error);  // a reply nobody asked for: the stream is corrupt
      return;
    }
    p = std::move(inflight_.front());
    inflight_.pop_front();
  }
  if (p.finished) return;
  if (r.is_error()) {
    if (p.eval_script && r.str().starts_with("NOSCRIPT")) {
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
    std::lock_guard lock(mutex_);
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

void connection::on_deadline_timer() {
  const auto now = clock::now();
  std::vector<reply_callback> expired;
  auto next = clock::time_point::max();
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
    std::lock_guard lock(mutex_);
    sweep(outbox_pending_);
    sweep(inflight_);
    timer_at_ = next;
  }
  arm_deadline_timer();
  counters_.timeouts.fetch_add(expired.size(), std::memory_order_relaxed);
  for (auto& done : expired)
    done(errc::timeout, {});
}

}  // namespace dlock::net
