#include "topology/replica_ack.hpp"

#include <memory>
#include <optional>
#include <string>

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

struct acknowledged_call {
  net::connection& connection;
  write_ack ack;
  net::clock::time_point deadline;
  net::reply_callback done;
  std::optional<reply> script_reply;  // the script's successful reply, once in
  bool wait_outstanding = false;
  bool reported = false;

  void report(std::error_code ec, reply r) {
    if (std::exchange(reported, true)) return;
    done(ec, std::move(r));
  }

  // Replies on one connection come in order, so a WAIT sent behind the script answers after it
  // and counts the replicas that have it. Only a NOSCRIPT retry (re-sent as EVAL behind the
  // WAIT) breaks that; then the script's reply finds no WAIT outstanding and sends another.
  void on_script_reply(const std::shared_ptr<acknowledged_call>& self, std::error_code ec,
                       reply r) {
    if (ec) {
      report(ec, std::move(r));
      return;
    }
    script_reply = std::move(r);
    if (!wait_outstanding) {
      wait_outstanding = true;
      submit_wait(self);
    }
  }

  // Sends WAIT; whoever calls it has set wait_outstanding first. From the submitting thread it
  // writes nothing here: the script is out, and its reply may already be handled on the I/O
  // thread.
  void submit_wait(const std::shared_ptr<acknowledged_call>& self) const {
    const std::string replicas = std::to_string(ack.replicas);
    const std::string timeout = std::to_string(ack.timeout.count());
    const std::string_view args[] = {"WAIT", replicas, timeout};
    // WAIT may take its whole timeout: its deadline allows that, past the caller's.
    const auto wait_deadline = std::max(deadline, net::clock::now() + ack.timeout * 2);
    connection.submit(args, wait_deadline, [self](std::error_code ec, reply r) {
      self->wait_outstanding = false;
      if (!self->script_reply) return;  // answered before the script ran (see above)
      if (ec) {
        // Whether the replicas have the write is unknown: for the caller, as uncertain as a
        // lost reply, so a grant is undone.
        self->report(ec, std::move(*self->script_reply));
        return;
      }
      const auto acks = r.is_integer() ? r.integer() : 0;
      self->report(acks >= self->ack.replicas ? std::error_code() : errc::not_replicated,
                   std::move(*self->script_reply));
    });
  }
};

}  // namespace

void eval_acknowledged(net::connection& c, const script& s, std::span<const std::string_view> keys,
                       std::span<const std::string_view> args, net::clock::time_point deadline,
                       write_ack ack, net::reply_callback done, bool asking) {
  if (ack.replicas <= 0) {
    c.submit_eval(s, keys, args, deadline, std::move(done), asking);
    return;
  }
  // wait_outstanding is set before the script goes out: once it has, this thread must not
  // write to the call (its reply may be handled on the I/O thread before the WAIT below is sent).
  auto call = std::make_shared<acknowledged_call>(
      acknowledged_call{c, ack, deadline, std::move(done), {}, true, false});
  c.submit_eval(
      s, keys, args, deadline,
      [call](std::error_code ec, reply r) { call->on_script_reply(call, ec, std::move(r)); },
      asking);
  call->submit_wait(call);
}

}  // namespace dlock::detail
