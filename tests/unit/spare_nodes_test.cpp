// Reused table nodes: an erased entry's node keeps nothing alive, the next insertion takes it
// back, and only a bounded number are kept.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/spare_nodes.hpp"

namespace {

using dlock::detail::spare_nodes;

TEST(SpareNodes, AnErasedEntryKeepsNothingAliveAndItsNodeIsReused) {
  using table = std::unordered_map<std::string, std::shared_ptr<int>>;
  table t;
  spare_nodes<table, 2> spare;
  auto value = std::make_shared<int>(7);
  const std::string long_key(64, 'k');  // beyond the short-string buffer: its own allocation
  auto it = spare.insert(t, long_key, value);
  EXPECT_EQ(value.use_count(), 2);
  const auto* node_key = &it->first;
  spare.erase(t, it);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(value.use_count(), 1);  // the kept node let go of its value

  auto again = spare.insert(t, std::string(64, 'j'), std::make_shared<int>(8));
  EXPECT_EQ(&again->first, node_key);  // the same node, filled anew
  EXPECT_EQ(again->first, std::string(64, 'j'));
  EXPECT_EQ(*again->second, 8);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.count(std::string(64, 'j')), 1u);
  EXPECT_EQ(t.count(long_key), 0u);
}

TEST(SpareNodes, AMapEntryWithoutAValueIsValueInitialised) {
  using table = std::unordered_map<std::string, int>;
  table t;
  spare_nodes<table> spare;
  auto it = spare.insert(t, "a");
  it->second = 5;
  spare.erase(t, it);
  EXPECT_EQ(spare.insert(t, "b")->second, 0);  // not the 5 the reused node held
}

TEST(SpareNodes, KeepsAtMostItsBoundAndTheTableStaysConsistent) {
  using table = std::unordered_set<std::shared_ptr<int>>;
  table t;
  spare_nodes<table, 2> spare;
  std::vector<std::shared_ptr<int>> values;
  for (int i = 0; i < 5; ++i) {
    values.push_back(std::make_shared<int>(i));
    spare.insert(t, values.back());
  }
  for (const auto& v : values)
    spare.erase(t, t.find(v));  // three are freed, two kept
  EXPECT_TRUE(t.empty());
  for (const auto& v : values)
    EXPECT_EQ(v.use_count(), 1);
  for (const auto& v : values)
    spare.insert(t, v);
  EXPECT_EQ(t.size(), values.size());
  for (const auto& v : values)
    EXPECT_EQ(t.count(v), 1u);
}

}  // namespace
