#include "wire/resp.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>

namespace dlock::wire {

void encode_array_header(std::string& out, std::size_t count) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, count);
  out += '*';
  out.append(digits, end);
  out += "\r\n";
}

void encode_bulk(std::string& out, std::string_view arg) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, arg.size());
  out += '$';
  out.append(digits, end);
  out += "\r\n";
  out.append(arg);
  out += "\r\n";
}

void encode_command(std::string& out, std::span<const std::string_view> args) {
  encode_array_header(out, args.size());
  for (auto arg : args)
    encode_bulk(out, arg);
}

void resp_parser::feed(std::string_view bytes) {
  if (bytes.empty()) return;
  auto room = prepare(bytes.size());
  std::memcpy(room.data(), bytes.data(), bytes.size());
  commit(bytes.size());
}

std::span<char> resp_parser::prepare(std::size_t n) {
  compact();
  if (buffer_.size() < end_ + n) buffer_.resize(std::max(end_ + n, buffer_.size() * 2));
  return {buffer_.data() + end_, buffer_.size() - end_};
}

void resp_parser::commit(std::size_t k) {
  end_ = std::min(end_ + k, buffer_.size());
}

void resp_parser::compact() {
  if (pos_ == 0) return;
  if (pos_ == end_) {
    pos_ = end_ = scan_from_ = 0;
    return;
  }
  // Move only when the consumed prefix dominates, so a large partial bulk is not copied on
  // every small read.
  if (pos_ < buffer_.size() / 2) return;
  std::memmove(buffer_.data(), buffer_.data() + pos_, end_ - pos_);
  end_ -= pos_;
  scan_from_ -= pos_;
  pos_ = 0;
}

void resp_parser::reset() {
  buffer_.clear();
  pos_ = end_ = scan_from_ = 0;
  stack_.clear();
  failed_ = false;
  error_.clear();
}

resp_parser::status resp_parser::fail(std::string message) {
  failed_ = true;
  error_ = std::move(message);
  return status::error;
}

bool resp_parser::parse_integer(std::string_view text, std::int64_t& value) const {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// Finds the CRLF that ends the header line starting after the type byte at pos_.
// On success `line` views the line's text (without type byte and CRLF).
bool resp_parser::read_line(std::string_view& line) {
  const std::size_t start = pos_ + 1;
  std::size_t from = std::max(scan_from_, start);
  const char* base = buffer_.data();
  const void* cr = from < end_ ? std::memchr(base + from, '\r', end_ - from) : nullptr;
  if (cr == nullptr) {
    scan_from_ = end_;
    return false;
  }
  const std::size_t at = static_cast<const char*>(cr) - base;
  scan_from_ = at;  // a re-scan after more bytes arrive starts at this CR
  if (at + 1 >= end_) return false;
  line = std::string_view(base + start, at - start);
  return true;
}

resp_parser::status resp_parser::parse_element(reply& out, bool& opened_array) {
  const char type = buffer_[pos_];
  if (type != '+' && type != '-' && type != ':' && type != '$' && type != '*') {
    static const char hex[] = "0123456789abcdef";
    const auto byte = static_cast<unsigned char>(type);
    return fail(std::string("unexpected type byte 0x") + hex[byte >> 4] + hex[byte & 15]);
  }
  std::string_view line;
  const bool complete = read_line(line);
  // Judge the length the same way however the bytes were split: by the line's own text. An
  // incomplete line is everything up to scan_from_, which stops at a CR still waiting for its
  // LF: that CR ends the line rather than lengthening it.
  const std::size_t seen = complete ? line.size() : scan_from_ - pos_ - 1;
  if (seen > limits_.max_line_length) return fail("header line exceeds the length limit");
  if (!complete) return status::need_more;
  const std::size_t after_line = pos_ + 1 + line.size() + 2;
  if (buffer_[after_line - 1] != '\n') return fail("CR not followed by LF in a header line");

  auto consume = [&](std::size_t to) {
    pos_ = to;
    scan_from_ = to;
  };

  switch (type) {
    case '+':
      out = reply::simple_string(std::string(line));
      consume(after_line);
      return status::reply;
    case '-':
      out = reply::error(std::string(line));
      consume(after_line);
      return status::reply;
    case ':': {
      std::int64_t v = 0;
      if (!parse_integer(line, v)) return fail("malformed integer reply");
      out = reply::integer(v);
      consume(after_line);
      return status::reply;
    }
    case '$': {
      std::int64_t len = 0;
      if (!parse_integer(line, len)) return fail("malformed bulk string length");
      if (len == -1) {
        out = reply();
        consume(after_line);
        return status::reply;
      }
      if (len < 0 || static_cast<std::uint64_t>(len) > limits_.max_bulk_length) {
        return fail("bulk string length out of range: " + std::string(line));
      }
      const auto n = static_cast<std::size_t>(len);
      if (end_ - after_line < n + 2) return status::need_more;
      if (buffer_[after_line + n] != '\r' || buffer_[after_line + n + 1] != '\n') {
        return fail("bulk string not terminated by CRLF");
      }
      out = reply::bulk_string(std::string(buffer_.data() + after_line, n));
      consume(after_line + n + 2);
      return status::reply;
    }
    case '*': {
      std::int64_t count = 0;
      if (!parse_integer(line, count)) return fail("malformed array length");
      if (count == -1) {
        out = reply();
        consume(after_line);
        return status::reply;
      }
      if (count < 0 || static_cast<std::uint64_t>(count) > limits_.max_array_length) {
        return fail("array length out of range: " + std::string(line));
      }
      if (count == 0) {
        out = reply::array({});
        consume(after_line);
        return status::reply;
      }
      if (stack_.size() >= limits_.max_depth) return fail("arrays nested too deeply");
      frame f{{}, static_cast<std::size_t>(count)};
      // Never trust a length for allocation: a hostile header must not reserve gigabytes.
      f.elements.reserve(std::min<std::size_t>(f.expected, 64));
      stack_.push_back(std::move(f));
      consume(after_line);
      opened_array = true;
      return status::reply;
    }
    default:
      return fail("unreachable: type byte checked above");
  }
}

resp_parser::status resp_parser::next(reply& out) {
  if (failed_) return status::error;
  for (;;) {
    if (pos_ == end_) return status::need_more;
    reply element;
    bool opened_array = false;
    const status s = parse_element(element, opened_array);
    if (s != status::reply) return s;
    if (opened_array) continue;
    for (;;) {
      if (stack_.empty()) {
        out = std::move(element);
        return status::reply;
      }
      frame& top = stack_.back();
      top.elements.push_back(std::move(element));
      if (top.elements.size() < top.expected) break;
      element = reply::array(std::move(top.elements));
      stack_.pop_back();
    }
  }
}

}  // namespace dlock::wire
