// Telling well-formed UTF-8 from bytes that are not: lock names and labels are arbitrary bytes,
// while JSON, Prometheus label values and terminals want UTF-8.
#pragma once

#include <cstddef>
#include <string_view>

namespace dlock::detail {

/// The length of the well-formed UTF-8 sequence at `s[i]` (i < s.size()), or 0 if the bytes
/// there are not one (overlong forms, surrogates and code points past U+10FFFF included).
inline std::size_t utf8_sequence(std::string_view s, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  if (b < 0x80) return 1;
  std::size_t n = 0;
  char32_t cp = 0;
  if ((b & 0xE0) == 0xC0) {
    n = 2;
    cp = b & 0x1F;
  } else if ((b & 0xF0) == 0xE0) {
    n = 3;
    cp = b & 0x0F;
  } else if ((b & 0xF8) == 0xF0) {
    n = 4;
    cp = b & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace dlock::detail
