// Redisson's rule for the keys and channels derived from a lock name, and its inverse for `ls`.
#include <gtest/gtest.h>

#include "core/random.hpp"
#include "dlock/keys.hpp"
#include "locks/kinds/lock_kind.hpp"

namespace {

using dlock::derived_key;
using dlock::keys_of_lock;
using dlock::lock_names_of_fence_counter;

TEST(Keys, ANameWithoutBracesIsWrappedInAHashTag) {
  EXPECT_EQ(derived_key("redisson_lock_token", "job"), "redisson_lock_token:{job}");
  const auto k = keys_of_lock("orders:42");
  EXPECT_EQ(k.lock, "orders:42");
  EXPECT_EQ(k.fence_counter, "redisson_lock_token:{orders:42}");
  EXPECT_EQ(k.unlock_channel, "redisson_lock__channel:{orders:42}");
}

TEST(Keys, ANameWithABraceAnywhereIsUsedAsItIsEvenWithoutACompleteTag) {
  // Redisson checks only for '{'; a "complete tag" test would wrap these and miss its wake-ups.
  for (const char* name : {"job{", "lock:{}", "}{x", "{a}", "a{b}c", "{", "x{y"}) {
    EXPECT_EQ(derived_key("p", name), std::string("p:") + name) << name;
    EXPECT_EQ(keys_of_lock(name).unlock_channel, std::string("redisson_lock__channel:") + name);
  }
  EXPECT_EQ(derived_key("p", "}x"), "p:{}x}") << "a lone '}' is not a brace that counts";
}

TEST(Keys, ListingFindsTheNamesAsWritten) {
  for (const char* name : {"job", "job{", "lock:{}", "}{x", "a{b}c", "-dash", "two\nlines", ""}) {
    if (*name == '\0') continue;
    const auto names = lock_names_of_fence_counter(keys_of_lock(name).fence_counter);
    ASSERT_FALSE(names.empty()) << name;
    EXPECT_EQ(names.front(), name) << "the plain reading comes first";
  }
  // "a" and "{a}" derive the same keys: both are offered, the plain one first.
  EXPECT_EQ(lock_names_of_fence_counter("redisson_lock_token:{a}"),
            (std::vector<std::string>{"a", "{a}"}));
  EXPECT_EQ(lock_names_of_fence_counter("redisson_lock_token:{}"),
            (std::vector<std::string>{"{}"}));
  EXPECT_TRUE(lock_names_of_fence_counter("redisson_lock_token:abc").empty())
      << "no name derives a counter without a brace";
  EXPECT_TRUE(lock_names_of_fence_counter("other:{a}").empty());
}

TEST(Keys, SuffixedKeysFollowRedissonsSuffixRule) {
  using dlock::detail::suffixed_key;
  EXPECT_EQ(suffixed_key("sem", "timeout"), "{sem}:timeout");
  EXPECT_EQ(suffixed_key("a{b}c", "timeout"), "a{b}c:timeout") << "the name's own tag decides";
  EXPECT_EQ(suffixed_key("x{", "write_intent"), "x{:write_intent");
}

TEST(Keys, PermitIdsRoundTripThroughHex) {
  using dlock::detail::from_hex;
  using dlock::detail::random_raw;
  using dlock::detail::to_hex;
  const auto id = random_raw(16);
  ASSERT_EQ(id.size(), 16u);
  EXPECT_EQ(to_hex(id).size(), 32u);
  EXPECT_EQ(from_hex(to_hex(id)), id);
  EXPECT_EQ(from_hex("0aFF"), std::string("\x0a\xff", 2));
  EXPECT_FALSE(from_hex("abc")) << "odd length";
  EXPECT_FALSE(from_hex("zz")) << "not hex";
  EXPECT_NE(random_raw(16), random_raw(16));
}

}  // namespace
