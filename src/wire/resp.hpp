// RESP2 encoding and decoding, sans-io: bytes in, replies out. Nothing here touches a socket or
// a clock, so every edge case is unit-testable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/redis/reply.hpp"

namespace dlock::wire {

/// Appends `args` to `out` as one RESP2 command (an array of bulk strings).
void encode_command(std::string& out, std::span<const std::string_view> args);

/// Appends the array header of a command with `count` arguments; follow with `encode_bulk`.
void encode_array_header(std::string& out, std::size_t count);
void encode_bulk(std::string& out, std::string_view arg);

/// Bounds that protect the reader from hostile or corrupt input.
struct parser_limits {
  std::size_t max_bulk_length = 512u * 1024 * 1024;  // Redis' own proto-max-bulk-len default
  std::size_t max_array_length = 1u << 28;
  std::size_t max_line_length = 64u * 1024 * 1024;
  std::size_t max_depth = 512;
};

/// Incremental RESP2 reader. Feed it bytes as they arrive, split anywhere; take complete replies
/// out. Work is linear in the input however it is split (partially read headers are re-scanned
/// only from where the previous scan stopped, and partially built arrays are kept on an explicit
/// stack, so nesting costs no recursion).
///
/// After malformed input the parser stays failed: `next` keeps returning `status::error` and
/// `error_message()` says what was wrong. The caller's only sane move is to close the connection.
class resp_parser {
 public:
  enum class status { reply, need_more, error };

  explicit resp_parser(parser_limits limits = {}) : limits_(limits) {}

  /// Appends bytes to the internal buffer.
  void feed(std::string_view bytes);
  /// Zero-copy feeding: `prepare(n)` returns at least `n` writable bytes at the end of the buffer;
  /// `commit(k)` marks the first `k` of them as received.
  std::span<char> prepare(std::size_t n);
  void commit(std::size_t k);

  /// Extracts the next complete reply into `out`.
  status next(reply& out);

  bool failed() const noexcept { return failed_; }
  const std::string& error_message() const noexcept { return error_; }
  /// Bytes received but not yet consumed by a complete reply.
  std::size_t buffered() const noexcept { return end_ - pos_; }
  /// Drops all buffered bytes and state (after a reconnect).
  void reset();

 private:
  struct frame {
    std::vector<reply> elements;
    std::size_t expected;
  };

  status fail(std::string message);
  // Parses one element at pos_. Returns need_more without consuming anything if it is incomplete.
  status parse_element(reply& out, bool& opened_array);
  bool read_line(std::string_view& line);
  bool parse_integer(std::string_view text, std::int64_t& value) const;
  void compact();

  parser_limits limits_;
  std::string buffer_;
  std::size_t pos_ = 0;        // first unconsumed byte
  std::size_t end_ = 0;        // one past the last received byte
  std::size_t scan_from_ = 0;  // where the search for the current line's CRLF resumes
  std::vector<frame> stack_;
  bool failed_ = false;
  std::string error_;
};

}  // namespace dlock::wire
