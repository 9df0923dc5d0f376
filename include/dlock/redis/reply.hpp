// dlock/redis/reply.hpp — one RESP2 reply from the server.
#pragma once

#include "dlock/export.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock {

/// A RESP2 reply: nil, a simple or bulk string, an error, an integer, or an array of replies
/// (which may nest). A value type; copies are deep.
class DLOCK_API reply {
 public:
  enum class kind : std::uint8_t { nil, simple_string, bulk_string, error, integer, array };

  /// A nil reply (`$-1` or `*-1`).
  reply() noexcept = default;

  static reply simple_string(std::string s) { return reply(kind::simple_string, std::move(s)); }
  static reply bulk_string(std::string s) { return reply(kind::bulk_string, std::move(s)); }
  static reply error(std::string message) { return reply(kind::error, std::move(message)); }
  static reply integer(std::int64_t v) noexcept {
    reply r;
    r.kind_ = kind::integer;
    r.integer_ = v;
    return r;
  }
  static reply array(std::vector<reply> elements) {
    reply r;
    r.kind_ = kind::array;
    r.elements_ = std::move(elements);
    return r;
  }

  kind type() const noexcept { return kind_; }
  bool is_nil() const noexcept { return kind_ == kind::nil; }
  /// True for simple and bulk strings (not for errors).
  bool is_string() const noexcept {
    return kind_ == kind::simple_string || kind_ == kind::bulk_string;
  }
  bool is_error() const noexcept { return kind_ == kind::error; }
  bool is_integer() const noexcept { return kind_ == kind::integer; }
  bool is_array() const noexcept { return kind_ == kind::array; }

  /// The text of a string or error reply. Throws `dlock::error(errc::unexpected_reply)` for any
  /// other kind.
  const std::string& str() const;
  /// The value of an integer reply. Throws `dlock::error(errc::unexpected_reply)` otherwise.
  std::int64_t integer() const;
  /// The elements of an array reply. Throws `dlock::error(errc::unexpected_reply)` otherwise.
  const std::vector<reply>& elements() const;
  std::vector<reply>& elements();
  /// Element `i` of an array reply. Throws `errc::unexpected_reply` if not an array or if `i` is
  /// out of range.
  const reply& at(std::size_t i) const;

  /// A short human-readable rendering, for messages and test failures.
  std::string to_string() const;

  friend bool operator==(const reply& a, const reply& b) = default;

 private:
  reply(kind k, std::string s) : kind_(k), text_(std::move(s)) {}

  kind kind_ = kind::nil;
  std::int64_t integer_ = 0;
  std::string text_;
  std::vector<reply> elements_;
};

}  // namespace dlock
