// Unit tests for dlock::error, dlock::errc and dlock::error_category().
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "dlock/error.hpp"

namespace {

using dlock::errc;

const std::vector<errc>& all_errcs() {
  static const std::vector<errc> all = {
      errc::invalid_argument, errc::invalid_url,    errc::connect_failed,
      errc::auth_failed,      errc::tls_failed,     errc::timeout,
      errc::connection_lost,  errc::client_closed,  errc::protocol_error,
      errc::server_error,     errc::wrong_type,     errc::unexpected_reply,
      errc::lease_lost,       errc::server_busy,    errc::permission_denied,
      errc::read_only,        errc::not_replicated, errc::upgrade_conflict,
      errc::cancelled,
  };
  return all;
}

TEST(ErrorCategory, NameIsDlock) {
  EXPECT_STREQ(dlock::error_category().name(), "dlock");
}

TEST(ErrorCategory, IsASingleton) {
  EXPECT_EQ(&dlock::error_category(), &dlock::error_category());
  EXPECT_TRUE(dlock::error_category() == dlock::error_category());
  EXPECT_FALSE(dlock::error_category() == std::generic_category());
  EXPECT_FALSE(dlock::error_category() == std::system_category());
}

TEST(ErrorCategory, ErrcValuesAreContiguousFromOne) {
  // The enum starts at 1 so that a value-initialized error_code (0) never means a dlock error.
  const auto& all = all_errcs();
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(static_cast<int>(all[i]), static_cast<int>(i) + 1);
  }
}

TEST(ErrorCategory, EveryErrcHasADistinctNonEmptyMessage) {
  std::set<std::string> seen;
  const std::string unknown = dlock::error_category().message(0);
  for (errc e : all_errcs()) {
    const std::string msg = dlock::error_category().message(static_cast<int>(e));
    EXPECT_FALSE(msg.empty()) << "errc " << static_cast<int>(e);
    EXPECT_NE(msg, unknown) << "errc " << static_cast<int>(e) << " uses the fallback message";
    EXPECT_TRUE(seen.insert(msg).second) << "duplicate message: " << msg;
  }
  EXPECT_EQ(seen.size(), all_errcs().size());
}

TEST(ErrorCategory, UnknownValuesHaveAFallbackMessage) {
  EXPECT_FALSE(dlock::error_category().message(0).empty());
  EXPECT_FALSE(dlock::error_category().message(-1).empty());
  EXPECT_FALSE(dlock::error_category().message(9999).empty());
}

TEST(ErrorCategory, SpecificMessages) {
  EXPECT_EQ(dlock::error_category().message(static_cast<int>(errc::timeout)), "timed out");
  EXPECT_EQ(dlock::error_category().message(static_cast<int>(errc::invalid_url)), "invalid URL");
}

TEST(ErrorCode, IsErrorCodeEnumIsSpecialized) {
  static_assert(std::is_error_code_enum<errc>::value);
  static_assert(std::is_error_code_enum_v<errc>);
  static_assert(!std::is_error_condition_enum_v<errc>);
  // Implicit conversion to std::error_code works thanks to is_error_code_enum + ADL.
  std::error_code ec = errc::timeout;
  EXPECT_EQ(ec.value(), static_cast<int>(errc::timeout));
  EXPECT_EQ(&ec.category(), &dlock::error_category());
  EXPECT_TRUE(ec);  // non-zero, so it is "an error"
}

TEST(ErrorCode, MakeErrorCodeUsesTheDlockCategory) {
  for (errc e : all_errcs()) {
    const std::error_code ec = dlock::make_error_code(e);
    EXPECT_EQ(ec.value(), static_cast<int>(e));
    EXPECT_EQ(&ec.category(), &dlock::error_category());
    EXPECT_EQ(ec.message(), dlock::error_category().message(static_cast<int>(e)));
    EXPECT_TRUE(ec == e);
  }
}

TEST(ErrorCode, DistinctErrcsCompareUnequal) {
  for (errc a : all_errcs()) {
    for (errc b : all_errcs()) {
      EXPECT_EQ(dlock::make_error_code(a) == dlock::make_error_code(b), a == b);
    }
  }
}

TEST(ErrorCode, DoesNotCompareEqualToGenericCodesWithTheSameValue) {
  const std::error_code ec = errc::invalid_argument;  // value 1
  const std::error_code generic(1, std::generic_category());
  EXPECT_NE(ec, generic);
  EXPECT_FALSE(ec == std::errc::timed_out);
  EXPECT_FALSE(std::error_code(errc::timeout) == std::errc::timed_out);
}

TEST(Error, DerivesFromSystemError) {
  static_assert(std::is_base_of_v<std::system_error, dlock::error>);
  static_assert(std::is_base_of_v<std::runtime_error, dlock::error>);
  static_assert(std::is_base_of_v<std::exception, dlock::error>);
  static_assert(std::is_nothrow_copy_constructible_v<dlock::error>);
}

TEST(Error, CodeComparesEqualToItsErrc) {
  for (errc e : all_errcs()) {
    const dlock::error err(e);
    EXPECT_TRUE(err.code() == e);
    EXPECT_EQ(err.code(), dlock::make_error_code(e));
    EXPECT_EQ(&err.code().category(), &dlock::error_category());
    for (errc other : all_errcs()) {
      if (other != e) {
        EXPECT_FALSE(err.code() == other);
      }
    }
  }
}

TEST(Error, WhatIncludesTheCategoryMessage) {
  const dlock::error err(errc::lease_lost);
  EXPECT_NE(std::string(err.what()).find("lease lost"), std::string::npos) << err.what();
}

TEST(Error, WhatIncludesTheGivenText) {
  const dlock::error err(errc::server_error, "ERR something bad");
  EXPECT_TRUE(err.code() == errc::server_error);
  EXPECT_NE(std::string(err.what()).find("ERR something bad"), std::string::npos) << err.what();
}

TEST(Error, ConstructFromErrorCode) {
  const dlock::error err(dlock::make_error_code(errc::lease_lost), "lost it");
  EXPECT_TRUE(err.code() == errc::lease_lost);
  EXPECT_NE(std::string(err.what()).find("lost it"), std::string::npos);
}

TEST(Error, CanBeCaughtAsSystemErrorAndStdException) {
  try {
    throw dlock::error(errc::timeout, "slow");
  } catch (const std::system_error& e) {
    EXPECT_TRUE(e.code() == errc::timeout);
  }
  try {
    throw dlock::error(errc::timeout);
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos);
  }
}

TEST(Error, CopyPreservesCodeAndMessage) {
  const dlock::error original(errc::wrong_type, "WRONGTYPE");
  const dlock::error copy = original;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(copy.code(), original.code());
  EXPECT_STREQ(copy.what(), original.what());
}

}  // namespace
