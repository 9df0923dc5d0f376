#include "topology/topology.hpp"

#include "dlock/error.hpp"

namespace dlock::detail {

void topology::eval_on(net::connection& c, const script& s, std::span<const std::string_view> keys,
                       std::span<const std::string_view> args, net::clock::time_point deadline,
                       durability d, write_ack ack, net::reply_callback done, bool asking) {
  if (d == durability::master || ack.replicas <= 0) {
    c.submit_eval(s, keys, args, deadline, std::move(done), asking);
    return;
  }
  eval_acknowledged(
      c, s, keys, args, deadline, ack,
      [this, done = std::move(done)](std::error_code ec, reply r) {
        if (ec == errc::not_replicated) {
          counters_.not_replicated.fetch_add(1, std::memory_order_relaxed);
        }
        done(ec, std::move(r));
      },
      asking);
}

}  // namespace dlock::detail
