#include "core/random.hpp"

#include <openssl/rand.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "dlock/error.hpp"

namespace dlock::detail {
namespace {

// Tokens are wanted at lock-acquisition rates, and each RAND_bytes call costs a lock and a
// system call or two. So each thread draws 4 KiB at a time from the CSPRNG and hands them out
// in order (CSPRNG output is as good in a buffer as fresh). A forked child must not hand out the
// bytes its parent will: a fork bumps a generation number and stale buffers are refilled.
std::atomic<unsigned> fork_generation{0};
std::once_flag fork_handler_installed;

struct byte_pool {
  unsigned char bytes[4096];
  std::size_t used = sizeof bytes;
  unsigned generation = 0;
};
thread_local byte_pool pool;

void fill(unsigned char* out, std::size_t n) {
  if (RAND_bytes(out, static_cast<int>(n)) != 1) {
    throw error(errc::invalid_argument, "the system CSPRNG failed to produce random bytes");
  }
}

// Writes `n` bytes from this thread's pool, or straight from the CSPRNG when they are many.
void draw(unsigned char* out, std::size_t n) {
  std::call_once(fork_handler_installed, [] {
    ::pthread_atfork(nullptr, nullptr,
                     [] { fork_generation.fetch_add(1, std::memory_order_relaxed); });
  });
  if (n > sizeof pool.bytes / 4) {
    fill(out, n);
    return;
  }
  const unsigned generation = fork_generation.load(std::memory_order_relaxed);
  if (pool.generation != generation || pool.used + n > sizeof pool.bytes) {
    fill(pool.bytes, sizeof pool.bytes);
    pool.used = 0;
    pool.generation = generation;
  }
  std::memcpy(out, pool.bytes + pool.used, n);
  std::memset(pool.bytes + pool.used, 0, n);  // handed out once, never again
  pool.used += n;
}

std::vector<unsigned char> random_bytes(std::size_t n) {
  std::vector<unsigned char> out(n);
  draw(out.data(), n);
  return out;
}

void append_hex(std::string& out, unsigned char byte) {
  static const char hex[] = "0123456789abcdef";
  out += hex[byte >> 4];
  out += hex[byte & 15];
}

}  // namespace

// Drawn through a small buffer on the stack: every simple-lock acquisition calls this, and the
// hex string is then its only allocation.
std::string random_hex(std::size_t bytes) {
  std::string out;
  out.reserve(bytes * 2);
  unsigned char chunk[64];
  for (std::size_t done = 0; done < bytes;) {
    const auto n = std::min(bytes - done, sizeof chunk);
    draw(chunk, n);
    for (std::size_t i = 0; i < n; ++i)
      append_hex(out, chunk[i]);
    done += n;
  }
  return out;
}

std::string random_raw(std::size_t bytes) {
  const auto b = random_bytes(bytes);
  return {b.begin(), b.end()};
}

std::string to_hex(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw)
    append_hex(out, static_cast<unsigned char>(c));
  return out;
}

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
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
