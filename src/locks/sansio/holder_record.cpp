#include "locks/sansio/holder_record.hpp"

#include <charconv>

#include "core/process_facts.hpp"
#include "core/utf8.hpp"

namespace dlock::detail {
namespace {

// `s` as a JSON string, at most `limit` bytes of it.
void append_string(std::string& out, std::string_view s, std::size_t limit = std::string::npos) {
  out += '"';
  std::size_t taken = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence(s, i);
    if (taken + (n == 0 ? 1 : n) > limit) break;
    const char c = s[i];
    if (n == 0) {
      out += "\\ufffd";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\u00";
      out += hex[(c >> 4) & 0xF];
      out += hex[c & 0xF];
    } else {
      out.append(s.substr(i, n));
    }
    taken += n == 0 ? 1 : n;
    i += n == 0 ? 1 : n;
  }
  out += '"';
}

// A reader of the flat objects the scripts store: string and integer members only.
class flat_object_reader {
 public:
  explicit flat_object_reader(std::string_view text) : s_(text) {}

  // Calls `member(key, string_value, integer_value, is_string)` for each member; false if the
  // text is not such an object.
  template <typename F>
  bool read(F&& member) {
    skip_space();
    if (!eat('{')) return false;
    skip_space();
    if (eat('}')) return at_end();
    for (;;) {
      std::string key, text;
      std::int64_t number = 0;
      skip_space();
      if (!string_value(key)) return false;
      skip_space();
      if (!eat(':')) return false;
      skip_space();
      const bool is_string = peek() == '"';
      if (is_string ? !string_value(text) : !integer_value(number)) return false;
      member(key, text, number, is_string);
      skip_space();
      if (eat('}')) return at_end();
      if (!eat(',')) return false;
    }
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool at_end() {
    skip_space();
    return i_ == s_.size();
  }
  bool integer_value(std::int64_t& out) {
    const char* first = s_.data() + i_;
    const auto [end, ec] = std::from_chars(first, s_.data() + s_.size(), out);
    if (ec != std::errc() || end == first) return false;
    i_ += static_cast<std::size_t>(end - first);
    return true;
  }
  bool hex4(char32_t& out) {
    if (i_ + 4 > s_.size()) return false;
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(s_.data() + i_, s_.data() + i_ + 4, value, 16);
    if (ec != std::errc() || end != s_.data() + i_ + 4) return false;
    i_ += 4;
    out = value;
    return true;
  }
  static void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool escape(std::string& out) {
    const char c = peek();
    ++i_;
    switch (c) {
      case '"':
      case '\\':
      case '/':
        out += c;
        return true;
      case 'b':
        out += '\b';
        return true;
      case 'f':
        out += '\f';
        return true;
      case 'n':
        out += '\n';
        return true;
      case 'r':
        out += '\r';
        return true;
      case 't':
        out += '\t';
        return true;
      case 'u':
        return unicode_escape(out);
      default:
        return false;
    }
  }
  // \uXXXX, a surrogate pair as two of them; a lone surrogate reads as U+FFFD.
  bool unicode_escape(std::string& out) {
    char32_t cp = 0;
    if (!hex4(cp)) return false;
    if (cp >= 0xD800 && cp <= 0xDBFF && s_.substr(i_, 2) == "\\u") {
      i_ += 2;
      char32_t low = 0;
      if (!hex4(low)) return false;
      cp = (low >= 0xDC00 && low <= 0xDFFF) ? 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                                            : 0xFFFD;
    } else if (cp >= 0xD800 && cp <= 0xDFFF) {
      cp = 0xFFFD;
    }
    append_utf8(out, cp);
    return true;
  }
  bool string_value(std::string& out) {
    if (!eat('"')) return false;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out += c;
      } else if (!escape(out)) {
        return false;
      }
    }
    return false;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace

holder_facts holder_of_this_process(std::string label, std::string client_id) {
  auto facts = this_process();
  return {std::move(facts.host), facts.pid, std::move(facts.user),
          label.empty() ? std::move(facts.program) : std::move(label), std::move(client_id)};
}

std::string encode_holder(const holder_facts& facts) {
  std::string out = "{\"host\":";
  append_string(out, facts.host, 255);
  out += ",\"pid\":";
  out += std::to_string(facts.pid);
  out += ",\"user\":";
  append_string(out, facts.user, 255);
  out += ",\"label\":";
  append_string(out, facts.label, max_label_bytes);
  out += ",\"client\":";
  append_string(out, facts.client_id, 255);
  out += '}';
  return out;
}

std::optional<holder_identity> decode_holder(std::string_view stored) {
  holder_identity id;
  bool has_since = false;
  const bool ok = flat_object_reader(stored).read(
      [&](const std::string& key, std::string& text, std::int64_t number, bool is_string) {
        if (!is_string && key == "since_ms") {
          id.since = std::chrono::system_clock::time_point(std::chrono::milliseconds(number));
          has_since = true;
        } else if (!is_string && key == "pid") {
          id.pid = number;
        } else if (is_string && key == "host") {
          id.host = std::move(text);
        } else if (is_string && key == "user") {
          id.user = std::move(text);
        } else if (is_string && key == "label") {
          id.label = std::move(text);
        } else if (is_string && key == "client") {
          id.client_id = std::move(text);
        }
      });
  if (!ok || !has_since) return std::nullopt;
  return id;
}

}  // namespace dlock::detail
