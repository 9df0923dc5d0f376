#include "topology/sentinel.hpp"

#include <algorithm>
#include <future>

#include "dlock/error.hpp"
#include "net/redis_client_impl.hpp"
#include "net/subscriber.hpp"

namespace dlock::detail {

// The sentinels: one command connection each for asking where the master is, and one
// subscription each to +switch-master. I/O thread only, except construction.
class sentinel_watch {
 public:
  using resolved = std::function<void(std::error_code, node_address, std::string detail)>;

  sentinel_watch(const sentinel_options& s, std::shared_ptr<net::io_thread> io)
      : io_(std::move(io)), options_(s) {
    if (options_.master_name.empty()) {
      throw error(errc::invalid_argument, "Sentinel: the master's name is empty");
    }
    if (options_.sentinels.empty()) throw error(errc::invalid_argument, "Sentinel: no sentinels");
    io_->run([this] {
      for (const auto& o : options_.sentinels) {
        auto tls = o.tls.enabled ? net::make_tls_context(o.tls) : nullptr;
        auto c = std::make_unique<net::connection>(*io_, o, tls, net::connection::mode::commands);
        // Failed attempts are retried in the background; each question has its own deadline.
        c->start([](std::error_code, const std::string&) {});
        askers_.push_back(std::move(c));
      }
    });
  }

  ~sentinel_watch() {
    // Normally the client stopped the I/O thread first; a constructor that failed did not.
    if (!io_->running()) return;
    io_->close_then_release([this] { close(); },
                            [this] {
                              askers_.clear();
                              followers_.clear();
                            });
  }

  /// Asks every sentinel at once. The master a majority of them names wins as soon as it has
  /// that majority; if none gets one, the one most answers named once all have answered (the
  /// earliest such answer on a tie). I/O thread only.
  void resolve(resolved done) {
    struct round {
      resolved done;
      std::size_t outstanding;
      std::size_t majority;
      std::vector<std::pair<node_address, std::size_t>> named{};  // in order of first answer
      std::string failures{};
      bool answered = false;
    };
    auto r =
        std::make_shared<round>(round{std::move(done), askers_.size(), askers_.size() / 2 + 1});
    const std::string_view args[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name};
    for (std::size_t i = 0; i < askers_.size(); ++i) {
      const auto& o = askers_[i]->options();
      const auto deadline = net::clock::now() + o.connect_timeout + o.command_timeout;
      askers_[i]->submit(
          args, deadline, [r, where = o.redacted_url(), this](std::error_code ec, reply rep) {
            --r->outstanding;
            if (r->answered) return;
            std::optional<node_address> master;
            if (!ec) master = parse_master_address(rep);
            if (master) {
              auto it = std::find_if(r->named.begin(), r->named.end(), [&](const auto& n) {
                return n.first.host == master->host && n.first.port == master->port;
              });
              if (it == r->named.end()) it = r->named.insert(r->named.end(), {*master, 0});
              if (++it->second >= r->majority) {
                r->answered = true;
                r->done({}, it->first, {});
                return;
              }
            } else {
              if (!r->failures.empty()) r->failures += "; ";
              r->failures +=
                  where + ": " +
                  (ec             ? (rep.is_error() ? rep.str() : ec.message())
                   : rep.is_nil() ? "knows no master named '" + options_.master_name + "'"
                                  : "unexpected reply");
            }
            if (r->outstanding > 0) return;
            r->answered = true;
            if (r->named.empty()) {
              r->done(errc::connect_failed, {}, r->failures);
              return;
            }
            const auto most =
                std::max_element(r->named.begin(), r->named.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
            r->done({}, most->first, {});
          });
    }
  }

  /// Blocking resolve for construction (not on the I/O thread).
  node_address resolve_now() {
    std::promise<std::tuple<std::error_code, node_address, std::string>> answer;
    io_->post([&] {
      resolve([&](std::error_code ec, node_address a, std::string detail) {
        answer.set_value({ec, std::move(a), std::move(detail)});
      });
    });
    auto [ec, address, detail] = answer.get_future().get();
    if (ec) {
      throw error(ec, "no sentinel named the master '" + options_.master_name + "': " + detail);
    }
    return address;
  }

  /// Subscribes to +switch-master on every sentinel. I/O thread only.
  void follow(std::function<void(const node_address&)> on_switch) {
    for (const auto& o : options_.sentinels) {
      auto tls = o.tls.enabled ? net::make_tls_context(o.tls) : nullptr;
      auto s = std::make_unique<net::subscriber>(*io_, o, tls);
      s->add(
          net::subscriber::kind::channel, "+switch-master",
          [this, on_switch](std::string_view, std::string_view payload) {
            if (auto a = parse_switch_master(payload, options_.master_name)) on_switch(*a);
          },
          nullptr);
      followers_.push_back(std::move(s));
    }
  }

  void close() {
    for (auto& c : askers_)
      c->close(errc::client_closed);
    for (auto& s : followers_)
      s->close();
  }

  const std::string& master_name() const noexcept { return options_.master_name; }
  std::chrono::milliseconds check_period() const noexcept { return options_.master_check_period; }

 private:
  std::shared_ptr<net::io_thread> io_;
  const sentinel_options options_;
  std::vector<std::unique_ptr<net::connection>> askers_;
  std::vector<std::unique_ptr<net::subscriber>> followers_;
};

sentinel_topology::sentinel_topology(const connection_options& master,
                                     const sentinel_options& sentinels,
                                     std::shared_ptr<net::io_thread> io, write_ack ack,
                                     std::size_t lanes)
    : sentinel_topology(master, std::make_unique<sentinel_watch>(sentinels, io), io, ack, lanes) {}

sentinel_topology::sentinel_topology(const connection_options& master,
                                     std::unique_ptr<sentinel_watch> watch,
                                     std::shared_ptr<net::io_thread> io, write_ack ack,
                                     std::size_t lanes)
    : standalone_topology(
          at(master, watch->resolve_now()), io, ack,
          {.require_master = true, .background = false, .on_first_attempt = {}, .lanes = lanes}),
      watch_(std::move(watch)),
      check_period_(watch_->check_period()),
      check_timer_(io->context()) {
  io->run([this] {
    server().set_attempt_failed_handler([this](std::error_code) { ask_again(); });
    watch_->follow([this](const node_address& a) { move_to(a); });
    check_later();
  });
}

void sentinel_topology::check_later() {
  if (check_period_ <= std::chrono::milliseconds(0) || closed_) return;
  check_timer_.expires_after(check_period_);
  check_timer_.async_wait([this](std::error_code ec) {
    if (ec || closed_) return;
    ask_again();
    check_later();
  });
}

sentinel_topology::~sentinel_topology() = default;

void sentinel_topology::ask_again() {
  if (std::exchange(asking_, true)) return;
  watch_->resolve([this](std::error_code ec, node_address a, std::string) {
    asking_ = false;
    // No answer: the master's connections keep retrying with backoff, and their next failure
    // asks again.
    if (!ec) move_to(a);
  });
}

void sentinel_topology::move_to(const node_address& master) {
  auto& s = server();
  if (s.options.host == master.host && s.options.port == master.port) return;
  counters_.master_switches.fetch_add(1, std::memory_order_relaxed);
  io().report({.what = net::notice::kind::master_switched,
               .node = std::string(master.host).append(":").append(std::to_string(master.port)),
               .key = {},
               .detail = std::string("was ")
                             .append(s.options.host)
                             .append(":")
                             .append(std::to_string(s.options.port))});
  s.retarget(master.host, master.port);
}

void sentinel_topology::eval(node_id node, const script& s, std::span<const std::string_view> keys,
                             std::span<const std::string_view> args,
                             net::clock::time_point deadline, durability d,
                             net::reply_callback done) {
  standalone_topology::eval(
      node, s, keys, args, deadline, d,
      [this, done = std::move(done)](std::error_code ec, reply r) {
        if (ec == errc::read_only || (r.is_error() && r.str().starts_with("LOADING"))) {
          // The server we talk to was demoted (or is a replica catching up): ask where the
          // master is now; to the caller this is a passing condition, retried in its wait.
          ask_again();
          ec = errc::server_busy;
        }
        done(ec, std::move(r));
      });
}

void sentinel_topology::close(std::error_code reason) {
  closed_ = true;
  check_timer_.cancel();
  watch_->close();
  standalone_topology::close(reason);
}

}  // namespace dlock::detail
