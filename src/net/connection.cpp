// The connection's send path: commands queued by any thread, sent by a submitting thread or by
// the I/O thread, pipelined (connection.hpp says how). connection_lifecycle.cpp connects and
// closes it; connection_replies.cpp handles what comes back.
#include "net/connection.hpp"

#include <sys/socket.h>
#include <asio/error.hpp>
#include <cerrno>
#include <charconv>
#include <vector>

#include "core/one_shot.hpp"
#include "dlock/error.hpp"

namespace dlock::net {

connection::connection(io_thread& io, const connection_options& options,
                       std::shared_ptr<asio::ssl::context> tls, mode m)
    : io_(io),
      options_(options),
      tls_(std::move(tls)),
      mode_(m),
      backoff_(options.reconnect_min, options.reconnect_max),
      connect_timer_(io.context()),
      retry_timer_(io.context()),
      deadline_timer_(io.context()),
      keepalive_timer_(io.context()),
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
void connection::enqueue(pending&& p, Encode&& encode, bool asking) {
  bool become_writer = false;
  bool send_from_here = false;
  bool rearm = false;
  {
    detail::unique_lock lock(mutex_);
    if (closed_) {
      const auto reason = close_reason_;
      lock.unlock();
      p.done(reason, {});
      return;
    }
    if (asking) {
      // ASKING holds for the next command on the connection only: queued in the same critical
      // section, nothing another thread submits can come between it and its command.
      static constexpr std::string_view asking_args[] = {"ASKING"};
      wire::encode_command(outbox_, asking_args);
      outbox_pending_.push_back(
          pending{[](std::error_code, reply) {}, p.deadline, std::nullopt, {}, 0, false});
    }
    encode(outbox_);
    note_deadline_locked(p.deadline, rearm);
    outbox_pending_.push_back(std::move(p));
    become_writer = !std::exchange(writer_active_, true);
    send_from_here =
        inflight_.empty() ||
        (inflight_.size() == 1 && detail::one_shot_waiters.load(std::memory_order_relaxed) == 0);
  }
  if (rearm) io_.post([this] { arm_deadline_timer(); });
  if (!become_writer) return;
  // Sending from here saves a wake-up of the I/O thread. That matters when the connection is
  // idle (one caller: latency), and when the one command in flight is one nobody waits for (a
  // release sent without waiting, then the next acquisition: +12-24 % at 1 thread, measured).
  // While callers wait for replies, the I/O thread is about to hand out a batch of them, and
  // letting it write gathers everything the woken callers submit into one write (throughput).
  if (send_from_here && !io_.in_io_thread()) {
    if (write_batch::hold(*this) || write_directly()) return;
  }
  io_.post([this] { start_write(); });
}

namespace {
// This thread's open write_batch: how deeply nested, and the connections it holds back.
struct held_writes {
  int depth = 0;
  std::vector<connection*> connections;
};
thread_local held_writes this_thread_writes;
}  // namespace

write_batch::write_batch() noexcept {
  ++this_thread_writes.depth;
}

write_batch::~write_batch() {
  auto& held = this_thread_writes;
  if (--held.depth > 0) return;
  for (auto* c : held.connections)
    c->send_held_back();
  held.connections.clear();
}

bool write_batch::hold(connection& c) {
  auto& held = this_thread_writes;
  if (held.depth == 0) return false;
  held.connections.push_back(&c);
  return true;
}

void connection::send_held_back() {
  if (!write_directly()) io_.post([this] { start_write(); });
}

std::size_t connection::move_outbox_to_inflight_locked() {
  const std::size_t count = outbox_pending_.size();
  const auto now = clock::now();
  for (auto& p : outbox_pending_)
    p.written = now;
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
  detail::lock_guard socket(socket_mutex_);
  if (direct_fd_ < 0) return false;
  for (int round = 0; round < 4; ++round) {
    std::size_t count = 0;
    {
      detail::lock_guard lock(mutex_);
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
  detail::lock_guard socket(socket_mutex_);
  direct_fd_ = -1;
}

void connection::submit(std::span<const std::string_view> args, clock::time_point deadline,
                        reply_callback done, bool asking) {
  enqueue(
      pending{std::move(done), deadline, std::nullopt, {}, 0, false},
      [&](std::string& out) { wire::encode_command(out, args); }, asking);
}

void connection::submit_eval(const script& s, std::span<const std::string_view> keys,
                             std::span<const std::string_view> args, clock::time_point deadline,
                             reply_callback done, bool asking) {
  // "numkeys keys... args..." is kept, encoded, to re-send as EVAL after a NOSCRIPT. `encode`
  // reads it from `p` before `enqueue` moves `p` into the queue.
  pending p{std::move(done), deadline, s, {}, 1 + keys.size() + args.size(), false};
  char numkeys[24];
  const auto numkeys_len =
      std::to_chars(numkeys, numkeys + sizeof numkeys, keys.size()).ptr - numkeys;
  // Sized once: grown bulk by bulk, the tail of an acquisition reallocates two or three times.
  constexpr std::size_t bulk_overhead = 25;  // "$<length>\r\n" and "\r\n"
  std::size_t tail_size = bulk_overhead + static_cast<std::size_t>(numkeys_len);
  for (auto k : keys)
    tail_size += bulk_overhead + k.size();
  for (auto a : args)
    tail_size += bulk_overhead + a.size();
  p.eval_tail.reserve(tail_size);
  wire::encode_bulk(p.eval_tail, std::string_view(numkeys, numkeys_len));
  for (auto k : keys)
    wire::encode_bulk(p.eval_tail, k);
  for (auto a : args)
    wire::encode_bulk(p.eval_tail, a);
  const std::string& tail = p.eval_tail;
  const std::size_t count = 2 + p.eval_tail_count;
  enqueue(
      std::move(p),
      [&](std::string& out) {
        detail::assume_held(mutex_);  // enqueue encodes under the lock
        const bool loaded = !loaded_scripts_.insert(s.sha1()).second;
        wire::encode_array_header(out, count);
        wire::encode_bulk(out, loaded ? "EVALSHA" : "EVAL");
        wire::encode_bulk(out, loaded ? std::string_view(s.sha1()) : s.source());
        out += tail;
      },
      asking);
}

void connection::send_raw(std::string_view bytes) {
  {
    detail::lock_guard lock(mutex_);
    if (closed_) return;
    outbox_ += bytes;
    writer_active_ = true;
  }
  start_write();
}

void connection::resend_as_eval(pending&& p) {
  counters_.noscript_retries.fetch_add(1, std::memory_order_relaxed);
  // Retried once: EVAL cannot answer NOSCRIPT, and the resent command carries no script.
  const auto body = std::exchange(p.eval_script, std::nullopt);
  const std::string tail = std::move(p.eval_tail);
  const std::size_t count = 2 + p.eval_tail_count;
  enqueue(std::move(p), [&](std::string& out) {
    wire::encode_array_header(out, count);
    wire::encode_bulk(out, "EVAL");
    wire::encode_bulk(out, body->source());
    out += tail;
  });
}

// ---- writing ----

void connection::start_write(bool flush_small) {
  std::size_t count = 0;
  {
    detail::lock_guard lock(mutex_);
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

}  // namespace dlock::net
