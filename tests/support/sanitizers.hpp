// Repetition counts for tests that take one path many times. Under ASan or TSan CPU-bound code
// runs 5-15 times slower, and a sanitizer reports a bad access or a race the first time the path
// runs, not the ten-thousandth: such tests run fewer rounds there, the same paths.
#pragma once

namespace dlock::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)  // g++
inline constexpr bool under_sanitizer = true;
#elif defined(__has_feature)  // clang
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool under_sanitizer = true;
#else
inline constexpr bool under_sanitizer = false;
#endif
#else
inline constexpr bool under_sanitizer = false;
#endif

/// `n`, or `n / divisor` (at least 1) in a sanitizer build.
constexpr int fewer_under_sanitizers(int n, int divisor) {
  return under_sanitizer ? (n / divisor > 0 ? n / divisor : 1) : n;
}

}  // namespace dlock::testing
