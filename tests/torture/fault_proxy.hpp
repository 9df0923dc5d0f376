// A fault-injecting TCP proxy, in the manner of toxiproxy: these machines have no netem, so the
// torture harness and its tests put this between lock clients and the lock server to make the
// network misbehave on demand. It listens on 127.0.0.1 (an ephemeral port) and forwards each
// accepted connection to 127.0.0.1:<target port>, on its own asio I/O thread.
//
// Faults (all controls are thread-safe and have taken effect when they return):
//   latency + jitter  each chunk is held latency + uniform(0, jitter), order kept per connection
//   stall             bytes in both directions are held until the window ends, then delivered
//   half-open         existing connections become black holes: what the client sends is read
//                     and dropped, nothing is ever sent back (no data, FIN or RST), the
//                     upstream side is closed; connections accepted during the window are black
//                     holes too. After the window new connections work; black holes stay black.
//   reset             every connection (black holes included) is closed with RST (SO_LINGER 0)
//   refuse            the listening socket is closed for the window: connects are refused
//   heal              ends every window and the latency at once (black holes stay black)
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

namespace dlock::torture {

/// What the proxy has done since it started.
struct proxy_counters {
  std::uint64_t accepted = 0;           ///< connections accepted
  std::uint64_t active = 0;             ///< connections open now, black holes included
  std::uint64_t black_holed = 0;        ///< connections that became (or began as) black holes
  std::uint64_t reset = 0;              ///< connections closed with RST by reset_all
  std::uint64_t upstream_failures = 0;  ///< accepted connections whose target refused them
  std::uint64_t refuse_windows = 0;     ///< refuse_for calls
  std::uint64_t bytes_up = 0;           ///< client → target, delivered
  std::uint64_t bytes_down = 0;         ///< target → client, delivered
  std::uint64_t bytes_dropped = 0;      ///< client bytes swallowed by black holes
};

class fault_proxy {
 public:
  /// Starts listening and the I/O thread. Throws std::system_error if it cannot listen.
  explicit fault_proxy(std::uint16_t target_port);
  /// Closes every connection and joins the I/O thread. Never throws.
  ~fault_proxy();
  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;

  /// The port clients connect to.
  std::uint16_t port() const noexcept;

  /// Every chunk read from now on is delivered `latency + uniform(0, jitter)` after it arrived
  /// (never before an earlier chunk of the same direction). Zero both to turn it off.
  void set_latency(std::chrono::milliseconds latency, std::chrono::milliseconds jitter);
  /// Holds all bytes, both directions, until `d` from now; then they are delivered.
  void stall_for(std::chrono::milliseconds d);
  /// Turns every connection into a black hole, and every connection accepted in the next `d`.
  void half_open_for(std::chrono::milliseconds d);
  /// Closes every connection with RST, to the client and to the target.
  void reset_all();
  /// Refuses new connections for `d` (the listening socket is closed, then opened again on the
  /// same port).
  void refuse_for(std::chrono::milliseconds d);
  /// Ends latency, stall, half-open and refuse windows now.
  void heal();

  proxy_counters counters() const;

  struct core;

 private:
  std::shared_ptr<core> core_;
};

}  // namespace dlock::torture
