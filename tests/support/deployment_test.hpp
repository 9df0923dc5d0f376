// A test fixture run once per deployment (instantiate it over `all_deployments`): the deployment
// is started before each test and stopped after it, and `tagged` names keys that share a
// cluster slot, so one test's lock and data sit on one node everywhere.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>

#include "deployments.hpp"
#include "dlock/reply.hpp"
#include "redis_fixture.hpp"

namespace dlock::testing {

class deployment_test : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { d_ = start_deployment(GetParam()); }
  void TearDown() override { d_.reset(); }

  deployment& d() { return *d_; }
  /// "{<test>:<tag>}<suffix>": keys of one test and tag share a slot on a cluster.
  std::string tagged(std::string_view tag, std::string_view suffix) const {
    const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name(t->name());
    std::replace(name.begin(), name.end(), '/', '.');
    return "{" + name + ":" + std::string(tag) + "}" + std::string(suffix);
  }
  /// A plain connection to the master that serves `key`.
  raw_redis raw_for(std::string_view key) { return raw_redis(d().port_for(key)); }

 private:
  std::unique_ptr<deployment> d_;
};

/// A string reply's text; anything else shown as such (never throws, unlike reply::str()).
inline std::string text(const reply& r) {
  return r.is_string() ? r.str() : "<not a string: " + r.to_string() + ">";
}

}  // namespace dlock::testing
