#include "fault_proxy.hpp"

#include <array>
#include <asio/connect.hpp>
#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>
#include <atomic>
#include <deque>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <unordered_set>

namespace dlock::torture {

using clock = std::chrono::steady_clock;
using asio::ip::tcp;

class proxy_session;

// Everything below runs on the I/O thread, except the atomic counters and `run`.
struct fault_proxy::core {
  explicit core(std::uint16_t target) : target_port(target) {}

  // Declared before the io_context: sessions that its destruction frees still count down here.
  struct {
    std::atomic<std::uint64_t> accepted{0}, black_holed{0}, reset{0}, upstream_failures{0},
        refuse_windows{0}, bytes_up{0}, bytes_down{0}, bytes_dropped{0};
  } counts;
  std::atomic<std::uint64_t> active{0};

  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer reopen_timer{io};
  std::uint16_t port = 0;
  std::uint16_t target_port;
  std::thread thread;
  std::thread::id io_thread_id;

  std::chrono::milliseconds latency{0}, jitter{0};
  clock::time_point stall_until{}, half_open_until{}, refuse_until{};
  std::mt19937_64 random{std::random_device{}()};
  std::unordered_set<std::shared_ptr<proxy_session>> sessions;
  // A closed acceptor fails its pending accept; the generation stops that accept from starting
  // another loop beside the one the reopening starts.
  std::uint64_t accept_generation = 0;

  clock::time_point due_from(clock::time_point arrived) {
    auto due = arrived + latency;
    if (jitter.count() > 0) {
      std::uniform_int_distribution<std::int64_t> extra(0, jitter.count());
      due += std::chrono::milliseconds(extra(random));
    }
    return due;
  }
  bool half_open() const { return clock::now() < half_open_until; }

  void listen();
  void accept();
  void refuse(std::chrono::milliseconds d);
  void reopen();
  void expedite_all();

  /// Runs `f` on the I/O thread and waits for it, so a control has taken effect when it returns.
  template <class F>
  void run(F f) {
    if (std::this_thread::get_id() == io_thread_id) {
      f();
      return;
    }
    std::promise<void> done;
    asio::post(io, [&] {
      f();
      done.set_value();
    });
    done.get_future().wait();
  }
};

// One proxied connection: two directions (client → upstream, upstream → client), each a queue
// of timestamped chunks delivered in order once due and not stalled.
class proxy_session : public std::enable_shared_from_this<proxy_session> {
 public:
  proxy_session(fault_proxy::core& c, tcp::socket client)
      : core_(c), client_(std::move(client)), upstream_(c.io), up_(c.io), down_(c.io) {
    ++core_.active;
  }
  ~proxy_session() { --core_.active; }

  void start() {
    if (core_.half_open()) {
      become_black_hole();
    } else {
      auto self = shared_from_this();
      upstream_.async_connect(tcp::endpoint(asio::ip::address_v4::loopback(), core_.target_port),
                              [this, self](std::error_code ec) {
                                if (closed_ || black_hole_) return;
                                if (ec) {
                                  // The client already saw its connect succeed; a reset is the
                                  // closest to a refusal.
                                  ++core_.counts.upstream_failures;
                                  reset();
                                  return;
                                }
                                std::error_code ignored;
                                upstream_.set_option(tcp::no_delay(true), ignored);
                                connected_ = true;
                                read(down_);
                                pump(up_);
                              });
    }
    std::error_code ignored;
    client_.set_option(tcp::no_delay(true), ignored);
    read(up_);
  }

  void become_black_hole() {
    if (black_hole_ || closed_) return;
    black_hole_ = true;
    ++core_.counts.black_holed;
    for (auto* d : {&up_, &down_}) {
      d->queue.clear();
      d->timer.cancel();
    }
    std::error_code ignored;
    upstream_.close(ignored);
  }

  /// RST to both sides: SO_LINGER with a zero timeout makes close() abort the connection.
  void reset() {
    if (closed_) return;
    std::error_code ignored;
    for (auto* s : {&client_, &upstream_}) {
      if (!s->is_open()) continue;
      s->set_option(asio::socket_base::linger(true, 0), ignored);
      s->close(ignored);
    }
    finish();
  }

  /// Heal: whatever latency or a stall still holds is due now.
  void expedite() {
    for (auto* d : {&up_, &down_}) {
      for (auto& c : d->queue)
        c.due = {};
      d->last_due = {};
    }
    pump(up_);
    pump(down_);
  }

 private:
  struct chunk {
    std::string data;
    clock::time_point due;
  };
  struct direction {
    explicit direction(asio::io_context& io) : timer(io) {}
    std::array<char, 16 * 1024> buffer{};
    std::deque<chunk> queue;
    clock::time_point last_due{};
    std::string writing;  // the bytes on their way; non-empty while a write is in flight
    bool source_ended = false;
    asio::steady_timer timer;
  };

  tcp::socket& source(direction& d) { return &d == &up_ ? client_ : upstream_; }
  tcp::socket& destination(direction& d) { return &d == &up_ ? upstream_ : client_; }

  void read(direction& d) {
    auto self = shared_from_this();
    source(d).async_read_some(
        asio::buffer(d.buffer), [this, self, &d](std::error_code ec, std::size_t n) {
          if (closed_) return;
          if (black_hole_) {
            if (&d != &up_) return;  // the upstream side is gone
            if (ec) {
              close();  // the client gave up on the black hole: so do we, quietly
              return;
            }
            core_.counts.bytes_dropped += n;
            read(d);
            return;
          }
          if (ec) {
            // Deliver what is queued, then pass the end on (pump closes once the queue is empty).
            d.source_ended = true;
            pump(d);
            return;
          }
          const auto due = std::max(core_.due_from(clock::now()), d.last_due);
          d.last_due = due;
          d.queue.push_back({std::string(d.buffer.data(), n), due});
          pump(d);
          read(d);
        });
  }

  void pump(direction& d) {
    if (closed_ || black_hole_ || !d.writing.empty()) return;
    if (&d == &up_ && !connected_) return;
    if (d.queue.empty()) {
      if (d.source_ended) close();
      return;
    }
    const auto now = clock::now();
    const auto ready_at = std::max(d.queue.front().due, core_.stall_until);
    if (ready_at > now) {
      auto self = shared_from_this();
      d.timer.expires_at(ready_at);
      d.timer.async_wait([this, self, &d](std::error_code ec) {
        if (!ec) pump(d);
      });
      return;
    }
    // Everything already due leaves in one write.
    while (!d.queue.empty() && d.queue.front().due <= now) {
      d.writing += d.queue.front().data;
      d.queue.pop_front();
    }
    auto self = shared_from_this();
    asio::async_write(destination(d), asio::buffer(d.writing),
                      [this, self, &d](std::error_code ec, std::size_t n) {
                        d.writing.clear();
                        if (closed_ || black_hole_) return;
                        if (ec) {
                          close();
                          return;
                        }
                        (&d == &up_ ? core_.counts.bytes_up : core_.counts.bytes_down) += n;
                        pump(d);
                      });
  }

  void close() {
    if (closed_) return;
    std::error_code ignored;
    client_.close(ignored);
    upstream_.close(ignored);
    finish();
  }

  void finish() {
    closed_ = true;
    up_.timer.cancel();
    down_.timer.cancel();
    core_.sessions.erase(shared_from_this());
  }

  fault_proxy::core& core_;
  tcp::socket client_, upstream_;
  direction up_, down_;
  bool connected_ = false, black_hole_ = false, closed_ = false;
};

void fault_proxy::core::listen() {
  const tcp::endpoint at(asio::ip::address_v4::loopback(), port);
  acceptor.open(at.protocol());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  acceptor.bind(at);
  acceptor.listen();
  // Written once, before the I/O thread starts; a reopened acceptor binds the same port.
  if (port == 0) port = acceptor.local_endpoint().port();
  accept();
}

void fault_proxy::core::accept() {
  const auto generation = ++accept_generation;
  acceptor.async_accept([this, generation](std::error_code ec, tcp::socket socket) {
    if (generation != accept_generation || !acceptor.is_open()) return;
    if (!ec) {
      ++counts.accepted;
      auto s = std::make_shared<proxy_session>(*this, std::move(socket));
      sessions.insert(s);
      s->start();
    }
    accept();
  });
}

void fault_proxy::core::refuse(std::chrono::milliseconds d) {
  ++counts.refuse_windows;
  refuse_until = clock::now() + d;
  std::error_code ignored;
  acceptor.close(ignored);  // pending connects in the backlog are reset, new ones refused
  reopen_timer.expires_at(refuse_until);
  reopen_timer.async_wait([this](std::error_code ec) {
    if (!ec) reopen();
  });
}

void fault_proxy::core::reopen() {
  if (acceptor.is_open()) return;
  try {
    listen();
  } catch (const std::system_error&) {
    // The port lingers for a moment in some states; try again shortly rather than lose it.
    std::error_code ignored;
    acceptor.close(ignored);
    reopen_timer.expires_after(std::chrono::milliseconds(10));
    reopen_timer.async_wait([this](std::error_code ec) {
      if (!ec) reopen();
    });
  }
}

void fault_proxy::core::expedite_all() {
  const std::vector<std::shared_ptr<proxy_session>> all(sessions.begin(), sessions.end());
  for (const auto& s : all)
    s->expedite();
}

fault_proxy::fault_proxy(std::uint16_t target_port) : core_(std::make_shared<core>(target_port)) {
  core_->listen();
  core_->thread = std::thread([c = core_.get()] {
    auto guard = asio::make_work_guard(c->io);
    for (;;) {
      try {
        c->io.run();
        return;
      } catch (const std::exception&) {
        // A socket that failed under a handler must not take the whole proxy with it.
      }
    }
  });
  core_->io_thread_id = core_->thread.get_id();
}

fault_proxy::~fault_proxy() {
  core_->run([c = core_.get()] {
    std::error_code ignored;
    c->acceptor.close(ignored);
    c->reopen_timer.cancel();
    for (const auto& s :
         std::vector<std::shared_ptr<proxy_session>>(c->sessions.begin(), c->sessions.end())) {
      s->reset();
    }
    c->io.stop();
  });
  core_->thread.join();
}

std::uint16_t fault_proxy::port() const noexcept {
  return core_->port;
}

void fault_proxy::set_latency(std::chrono::milliseconds latency, std::chrono::milliseconds jitter) {
  core_->run([c = core_.get(), latency, jitter] {
    c->latency = latency;
    c->jitter = jitter;
  });
}

void fault_proxy::stall_for(std::chrono::milliseconds d) {
  core_->run([c = core_.get(), d] { c->stall_until = clock::now() + d; });
}

void fault_proxy::half_open_for(std::chrono::milliseconds d) {
  core_->run([c = core_.get(), d] {
    c->half_open_until = clock::now() + d;
    for (const auto& s : c->sessions)
      s->become_black_hole();
  });
}

void fault_proxy::reset_all() {
  core_->run([c = core_.get()] {
    const std::vector<std::shared_ptr<proxy_session>> all(c->sessions.begin(), c->sessions.end());
    c->counts.reset += all.size();
    for (const auto& s : all)
      s->reset();
  });
}

void fault_proxy::refuse_for(std::chrono::milliseconds d) {
  core_->run([c = core_.get(), d] { c->refuse(d); });
}

void fault_proxy::heal() {
  core_->run([c = core_.get()] {
    c->latency = c->jitter = std::chrono::milliseconds(0);
    const auto now = clock::now();
    c->stall_until = c->half_open_until = now;
    if (c->refuse_until > now) {
      c->refuse_until = now;
      c->reopen_timer.cancel();
      c->reopen();
    }
    c->expedite_all();
  });
}

proxy_counters fault_proxy::counters() const {
  const auto& n = core_->counts;
  return {.accepted = n.accepted,
          .active = core_->active,
          .black_holed = n.black_holed,
          .reset = n.reset,
          .upstream_failures = n.upstream_failures,
          .refuse_windows = n.refuse_windows,
          .bytes_up = n.bytes_up,
          .bytes_down = n.bytes_down,
          .bytes_dropped = n.bytes_dropped};
}

}  // namespace dlock::torture
