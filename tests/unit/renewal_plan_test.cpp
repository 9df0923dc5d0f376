// How a watchdog round is cut into script calls, without a server: per node, slot and kind, at
// most a batch each.
#include <gtest/gtest.h>

#include <map>

#include "locks/runtime/renewal_plan.hpp"

namespace {

using namespace dlock::detail;

struct fixture {
  mutex m;
  std::vector<std::shared_ptr<grant>> grants;
  std::map<const grant*, route> routes;

  void add(const lock_kind& kind, const std::string& name, route where) {
    auto g = std::make_shared<grant>(m, kind);
    g->names = std::make_shared<const lock_names>(name);
    g->owner = "owner";
    routes[g.get()] = where;
    grants.push_back(std::move(g));
  }
  std::vector<renewal_batch> plan(std::size_t batch) {
    return plan_renewals(
        grants, [&](const grant& g) { return routes.at(&g); }, batch);
  }
};

TEST(RenewalPlan, OneServerAndOneKindGiveFullBatches) {
  fixture f;
  for (int i = 0; i < 1250; ++i)
    f.add(simple_kind(), std::string("lock").append(std::to_string(i)), {});
  const auto batches = f.plan(500);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].grants.size(), 500u);
  EXPECT_EQ(batches[1].grants.size(), 500u);
  EXPECT_EQ(batches[2].grants.size(), 250u);
}

TEST(RenewalPlan, KindsNodesAndSlotsNeverShareACall) {
  fixture f;
  // 3 nodes x 2 slots x 2 kinds, 7 holds each.
  for (node_id node = 0; node < 3; ++node) {
    for (std::uint32_t slot : {100u, 9000u}) {
      for (const lock_kind* kind : {&reentrant_kind(), &simple_kind()}) {
        for (int i = 0; i < 7; ++i) {
          std::string name = std::to_string(node);
          name.append("/").append(std::to_string(slot)).append("/").append(std::to_string(i));
          f.add(*kind, name, {node, slot});
        }
      }
    }
  }
  const auto batches = f.plan(5);
  std::size_t holds = 0;
  for (const auto& b : batches) {
    ASSERT_FALSE(b.grants.empty());
    EXPECT_LE(b.grants.size(), 5u);
    for (const auto& g : b.grants) {
      EXPECT_EQ(f.routes.at(g.get()), b.where) << "a call holds keys of one node and slot";
      EXPECT_EQ(&g->kind, b.kind) << "and of one kind";
    }
    holds += b.grants.size();
  }
  EXPECT_EQ(holds, 3u * 2 * 2 * 7);
  EXPECT_EQ(batches.size(), 3u * 2 * 2 * 2) << "7 holds per group: one full call of 5, one of 2";
  for (std::size_t i = 1; i < batches.size(); ++i) {
    EXPECT_LE(batches[i - 1].where, batches[i].where) << "grouped by node, then slot";
  }
}

TEST(RenewalPlan, NothingToRenewIsNoCall) {
  fixture f;
  EXPECT_TRUE(f.plan(100).empty());
}

}  // namespace
