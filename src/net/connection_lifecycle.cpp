// Connecting, the handshake, reconnecting with backoff, and closing: the connection's life. The
// decisions (what the handshake sends, how replies are judged, how long to back off) are
// connect_fsm's; this file does the I/O.
#include "dlock/error.hpp"
#include "net/connection.hpp"

namespace dlock::net {

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
    attempt_failed(errc::connect_failed,
                   connect_timeout_message(options_, transport_->in_tls_handshake()));
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
  handshake_.emplace(options_, require_master_);
  start_read();
  write_buffer_ = handshake_->request();
  send_write_buffer();
}

void connection::on_handshake_reply(reply&& r) {
  auto verdict = handshake_->on_reply(r);
  if (verdict.state == handshake::status::failed) {
    attempt_failed(verdict.error, verdict.detail);
  } else if (verdict.state == handshake::status::ready) {
    became_ready();
  }
}

void connection::became_ready() {
  connect_timer_.cancel();
  state_ = state::ready;
  up_ = true;
  first_attempt_ended_ = true;
  backoff_.reset();
  last_read_at_ = clock::now();
  ping_sent_ = false;
  arm_keepalive();
  if (ever_connected_) {
    counters_.reconnects.fetch_add(1, std::memory_order_relaxed);
    io_.report({.what = notice::kind::reconnected, .node = node_name(), .key = {}, .detail = {}});
  }
  ever_connected_ = true;
  if (ready_handler_) ready_handler_();
  if (first_attempt_) std::exchange(first_attempt_, nullptr)({}, {});
  if (state_ != state::ready) return;
  // Commands queued during the reconnect go out first, from here (unless a writer is already
  // active: its posted start_write will). Only then may submitting threads write directly, so
  // two writers never interleave their bytes.
  bool take_over = false;
  {
    detail::lock_guard lock(mutex_);
    take_over = !std::exchange(writer_active_, true);
  }
  if (take_over) start_write();
  if (mode_ == mode::commands) {
    detail::lock_guard socket(socket_mutex_);
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
  first_attempt_ended_ = true;
  if (first_attempt_) std::exchange(first_attempt_, nullptr)(ec, detail);
  if (attempt_failed_handler_) attempt_failed_handler_(ec);
  if (state_ == state::backoff) schedule_reconnect();
}

void connection::fail_unsent(std::error_code reason) {
  if (state_ == state::ready || state_ == state::closed) return;
  std::deque<pending> failed;
  {
    detail::lock_guard lock(mutex_);
    outbox_.clear();
    loaded_scripts_.clear();
    failed.swap(outbox_pending_);
  }
  for (auto& p : failed) {
    if (!p.finished) p.done(reason, {});
  }
}

std::deque<connection::pending> connection::take_all_locked() {
  std::deque<pending> taken;
  taken.swap(inflight_);
  for (auto& p : outbox_pending_)
    taken.push_back(std::move(p));
  outbox_pending_.clear();
  outbox_.clear();
  loaded_scripts_.clear();  // whatever was queued to load them is gone too
  return taken;
}

void connection::fail_all(std::deque<pending>& failed, std::error_code reason) {
  for (auto& p : failed) {
    if (!p.finished) p.done(reason, {});
  }
}

void connection::retarget(const std::string& host, std::uint16_t port) {
  if (state_ == state::closed) return;
  const bool moved = options_.host != host || options_.port != port || !options_.unix_path.empty();
  options_.host = host;
  options_.port = port;
  options_.unix_path.clear();
  // The same address again (a re-resolution that changed nothing) keeps the backoff in force,
  // so a master that stays down is not hammered.
  if (!moved) return;
  if (state_ == state::ready) connection_failed(errc::connection_lost);
  if (state_ == state::connecting) {
    ++epoch_;
    connect_timer_.cancel();
    if (transport_) transport_->close();
  }
  if (state_ == state::backoff || state_ == state::connecting) {
    retry_timer_.cancel();
    backoff_.reset();
    begin_attempt();
  }
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
  io_.report({.what = notice::kind::connection_lost,
              .node = node_name(),
              .key = {},
              .detail = ec.message()});
  // Everything the callers were waiting on at the moment of the drop fails now, whether it had
  // reached the socket or not: a caller should not have to guess which of its commands will
  // still run later. (Subscriptions are re-sent in full by the ready handler.) Commands issued
  // from now on wait for the reconnect, up to their own deadlines.
  std::deque<pending> failed;
  {
    detail::lock_guard lock(mutex_);
    writer_active_ = false;
    failed = take_all_locked();
  }
  fail_all(failed, errc::connection_lost);
  schedule_reconnect();
}

void connection::schedule_reconnect() {
  if (state_ == state::closed) return;
  retry_timer_.expires_after(backoff_.next(jitter_()));
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
  keepalive_timer_.cancel();
  forget_socket();
  if (transport_) transport_->close();
  std::deque<pending> failed;
  {
    detail::lock_guard lock(mutex_);
    closed_ = true;
    close_reason_ = reason;
    failed = take_all_locked();
  }
  fail_all(failed, reason);
  if (first_attempt_) std::exchange(first_attempt_, nullptr)(reason, "connection closed");
}

}  // namespace dlock::net
