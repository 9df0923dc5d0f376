#include "core/random.hpp"

#include <openssl/rand.h>

#include <vector>

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

std::vector<unsigned char> random_bytes(std::size_t n) {
  std::vector<unsigned char> out(n);
  if (RAND_bytes(out.data(), static_cast<int>(n)) != 1) {
    throw error(errc::invalid_argument, "the system CSPRNG failed to produce random bytes");
  }
  return out;
}

void append_hex(std::string& out, unsigned char byte) {
  static const char hex[] = "0123456789abcdef";
  out += hex[byte >> 4];
  out += hex[byte & 15];
}

}  // namespace

std::string random_hex(std::size_t bytes) {
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char b : random_bytes(bytes))
    append_hex(out, b);
  return out;
}

std::string random_uuid() {
  auto b = random_bytes(16);
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    append_hex(out, b[i]);
  }
  return out;
}

}  // namespace dlock::detail
