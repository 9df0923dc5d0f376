// One multiplexed, automatically pipelined connection to one server.
//
// Any thread may submit commands. Their bytes are appended to an outbox under a short lock.
// One party at a time is the writer and sends the whole outbox in one write; everything
// submitted meanwhile leaves together in its next one. On an idle TCP or unix connection, or
// one with a single command in flight while no caller waits for a reply, the submitting thread
// that finds no writer becomes it and sends with a non-blocking send(2) itself, sparing a
// wake-up of the I/O thread; otherwise (callers waiting on replies, TLS, a full socket buffer)
// the I/O thread writes. Only the I/O thread reads: replies come back in order and are matched
// to the callers' completions in the same order. Nothing waits on a timer per command: one
// deadline timer is armed for the earliest deadline outstanding.
//
// When the connection drops, every command outstanding at that moment fails at once with
// errc::connection_lost (those already on the wire may or may not have run). Commands submitted
// while it reconnects wait in the outbox and go out after the handshake, unless their deadline
// passes first.
#pragma once

#include <asio/steady_timer.hpp>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>

#include "core/sync.hpp"
#include "dlock/redis/connection_options.hpp"
#include "dlock/redis/reply.hpp"
#include "dlock/redis/script.hpp"
#include "net/connect_fsm.hpp"
#include "net/io_thread.hpp"
#include "net/transport.hpp"
#include "wire/resp.hpp"

namespace dlock::net {

using clock = std::chrono::steady_clock;
/// Receives the reply, or an error: a `dlock::errc` such as timeout or connection_lost (with a nil
/// reply), or errc::server_error / auth_failed / wrong_type with the server's error reply.
using reply_callback = std::function<void(std::error_code, reply)>;

struct connection_counters {
  std::atomic<std::uint64_t> commands_sent{0};
  std::atomic<std::uint64_t> writes{0};
  std::atomic<std::uint64_t> replies{0};
  std::atomic<std::uint64_t> reconnects{0};
  std::atomic<std::uint64_t> connection_losses{0};
  std::atomic<std::uint64_t> timeouts{0};
  std::atomic<std::uint64_t> noscript_retries{0};
};

class connection;

/// Holds back this thread's direct writes. While one exists, a command the thread submits to an
/// idle connection is not sent at once but when the batch ends, with whatever was queued behind
/// it meanwhile: an acquisition's script and the reads that follow it leave in one send, with
/// no wake-up of the I/O thread for the second. Keep it short and never wait for a reply inside
/// one (that reply's command may be among those held back); other threads' commands to a held
/// connection wait for its end too. Nested batches end with the outermost.
class write_batch {
 public:
  write_batch() noexcept;
  ~write_batch();
  write_batch(const write_batch&) = delete;
  write_batch& operator=(const write_batch&) = delete;

 private:
  friend class connection;
  /// True if a batch is open on this thread: it then sends `c`'s outbox when it ends.
  static bool hold(connection& c);
};

class connection {
 public:
  enum class mode { commands, pubsub };
  using attempt_callback = std::function<void(std::error_code, const std::string& detail)>;

  connection(io_thread& io, const connection_options& options,
             std::shared_ptr<asio::ssl::context> tls, mode m);
  /// Destroy only on the I/O thread or after it has stopped.
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // --- any thread ---

  /// Queues one command. `done` runs exactly once: on the I/O thread, or inline on the calling
  /// thread with errc::client_closed if the connection is closed. `asking`: ASKING goes right
  /// before it (a cluster's ASK redirect), with no other thread's command between the two.
  void submit(std::span<const std::string_view> args, clock::time_point deadline,
              reply_callback done, bool asking = false);
  /// Queues EVALSHA of `s`; on NOSCRIPT the command is re-sent once as EVAL, transparently
  /// (without ASKING: a redirect then comes back, and its caller asks again). `asking` as for
  /// submit.
  void submit_eval(const script& s, std::span<const std::string_view> keys,
                   std::span<const std::string_view> args, clock::time_point deadline,
                   reply_callback done, bool asking = false);

  const connection_counters& counters() const noexcept { return counters_; }
  /// True while connected and past the handshake.
  bool up() const noexcept { return up_.load(std::memory_order_relaxed); }
  /// True while not up after an attempt ended: neither connected nor still on the first try.
  bool down() const noexcept {
    return !up() && first_attempt_ended_.load(std::memory_order_relaxed);
  }
  /// "host:port", or the unix socket's path. I/O thread only (retarget changes them).
  std::string node_name() const {
    return options_.unix_path.empty()
               ? std::string(options_.host).append(":").append(std::to_string(options_.port))
               : options_.unix_path;
  }
  /// I/O thread only for host and port (retarget changes them).
  const connection_options& options() const noexcept { return options_; }

  // --- I/O thread only ---

  /// Starts connecting. `first_attempt` learns how the first attempt ended; later attempts
  /// happen in the background with backoff until `close`.
  void start(attempt_callback first_attempt);
  /// Pubsub mode: writes raw command bytes once connected. Dropped if the connection drops,
  /// because the ready handler re-sends the whole subscription state after a reconnect.
  void send_raw(std::string_view bytes);
  void set_push_handler(std::function<void(reply&&)> handler) {
    push_handler_ = std::move(handler);
  }
  /// Runs after every successful connect and handshake, before queued commands are written.
  void set_ready_handler(std::function<void()> handler) { ready_handler_ = std::move(handler); }
  /// Points the connection at another server (a Sentinel failover, a moved cluster node): the
  /// current socket, if any, is dropped as a lost connection would be, and the next attempt,
  /// made at once, goes to `host`:`port`. No-op if already there and up.
  void retarget(const std::string& host, std::uint16_t port);
  /// While not connected: fails every command still waiting to be written with `reason` (they
  /// never reached a server), so that their callers can go elsewhere (a failed-over cluster
  /// master). No-op while connected.
  void fail_unsent(std::error_code reason);
  /// Every handshake checks ROLE and fails with errc::read_only unless the server is a master.
  void require_master() { require_master_ = true; }
  /// Runs after every failed connection attempt (the Sentinel topology asks the sentinels
  /// again).
  void set_attempt_failed_handler(std::function<void(std::error_code)> handler) {
    attempt_failed_handler_ = std::move(handler);
  }
  /// Fails every queued and in-flight command with `reason`, closes the socket, stops
  /// reconnecting. Idempotent.
  void close(std::error_code reason);
  bool ready() const noexcept { return state_ == state::ready; }

 private:
  enum class state { idle, connecting, ready, backoff, closed };

  struct pending {
    reply_callback done;
    clock::time_point deadline;
    // For EVALSHA: the script and the encoded "numkeys keys... args..." tail, to re-send as EVAL.
    std::optional<dlock::script> eval_script;
    std::string eval_tail;
    std::size_t eval_tail_count = 0;
    bool finished = false;        // completed early (timed out); its reply is discarded on arrival
    clock::time_point written{};  // when it went out (in flight only)
  };

  template <class Encode>
  void enqueue(pending&& p, Encode&& encode, bool asking = false);
  void note_deadline_locked(clock::time_point deadline, bool& rearm) DLOCK_REQUIRES(mutex_);
  void begin_attempt();
  void attempt_failed(std::error_code ec, const std::string& detail);
  void on_transport_connected();
  void on_handshake_reply(reply&& r);
  void became_ready();
  void connection_failed(std::error_code ec);
  bool write_directly();
  friend class write_batch;
  /// A write_batch that held this connection's outbox back ends: send it.
  void send_held_back();
  void write_rest(std::string rest, std::uint64_t epoch);
  void send_write_buffer();
  std::size_t move_outbox_to_inflight_locked() DLOCK_REQUIRES(mutex_);
  void forget_socket();
  void start_write(bool flush_small = false);
  void start_read();
  void on_bytes_read();
  void dispatch(reply&& r);
  void resend_as_eval(pending&& p);
  void arm_deadline_timer();
  void on_deadline_timer();
  void arm_keepalive();
  void schedule_reconnect();
  /// Everything in flight and queued, in order, leaving the queues and the outbox empty.
  std::deque<pending> take_all_locked() DLOCK_REQUIRES(mutex_);
  static void fail_all(std::deque<pending>& failed, std::error_code reason);

  io_thread& io_;
  connection_options options_;  // host and port change only on the I/O thread (retarget)
  std::shared_ptr<asio::ssl::context> tls_;
  const mode mode_;
  connection_counters counters_;
  std::atomic<bool> up_{false};
  std::atomic<bool> first_attempt_ended_{false};

  // Shared with submitting threads.
  detail::mutex mutex_;
  std::string outbox_ DLOCK_GUARDED_BY(mutex_);
  std::deque<pending> outbox_pending_ DLOCK_GUARDED_BY(mutex_);
  std::deque<pending> inflight_ DLOCK_GUARDED_BY(mutex_);  // written, awaiting replies, in order
  bool writer_active_ DLOCK_GUARDED_BY(mutex_) = false;    // a thread is sending the outbox
  bool closed_ DLOCK_GUARDED_BY(mutex_) = false;
  // Scripts this connection has sent in full (EVAL) since it last connected: later calls use
  // EVALSHA. Sending a script's first call as EVAL, rather than EVALSHA and a NOSCRIPT retry,
  // keeps every call in the order it was submitted: a retry would go out behind later commands
  // (a drop of a grant would land after the next grant with the same token, and delete it).
  std::unordered_set<std::string> loaded_scripts_ DLOCK_GUARDED_BY(mutex_);
  std::error_code close_reason_ DLOCK_GUARDED_BY(mutex_);
  clock::time_point timer_at_ DLOCK_GUARDED_BY(mutex_) = clock::time_point::max();

  // The socket a submitting thread may write to directly; the I/O thread clears it (under the
  // lock) before it closes the transport, so a descriptor is never written after its close.
  // Taken before mutex_ when both are needed.
  detail::mutex socket_mutex_;
  int direct_fd_ DLOCK_GUARDED_BY(socket_mutex_) = -1;
  std::uint64_t direct_epoch_ DLOCK_GUARDED_BY(socket_mutex_) = 0;
  std::string direct_buffer_ DLOCK_GUARDED_BY(socket_mutex_);

  // I/O thread only.
  state state_ = state::idle;
  std::uint64_t epoch_ = 0;  // bumps per attempt; handlers of older attempts are ignored
  std::shared_ptr<transport> transport_;
  wire::resp_parser parser_;
  std::string write_buffer_;
  bool writing_ = false;
  bool write_deferred_ = false;  // a small batch waits for the next replies (start_write)
  std::optional<handshake> handshake_;
  clock::time_point armed_at_ = clock::time_point::max();
  // When bytes last arrived: a connection silent for too long while replies are due (or, for
  // pub/sub, silent through a PING) is presumed dead, as a half-open TCP connection is.
  clock::time_point last_read_at_{};
  bool ping_sent_ = false;
  bool ever_connected_ = false;
  attempt_callback first_attempt_;
  reconnect_backoff backoff_;
  asio::steady_timer connect_timer_;
  asio::steady_timer retry_timer_;
  asio::steady_timer deadline_timer_;
  asio::steady_timer keepalive_timer_;
  std::function<void(reply&&)> push_handler_;
  std::function<void()> ready_handler_;
  std::function<void(std::error_code)> attempt_failed_handler_;
  bool require_master_ = false;
  std::minstd_rand jitter_;
};

}  // namespace dlock::net
