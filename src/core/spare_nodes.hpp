// A few nodes of an unordered map or set, kept after their entries were erased, to be filled
// again by the next insertion. Tables that gain and lose an entry per acquisition (the grants,
// the acquisitions in progress, the names with local activity) would otherwise allocate a node,
// and for string keys the key's buffer too, every time; a reused node keeps both.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace dlock::detail {

template <class Table, std::size_t Max = 4>
class spare_nodes {
 public:
  using node_type = typename Table::node_type;
  static constexpr bool is_map = requires { typename Table::mapped_type; };

  spare_nodes() { nodes_.reserve(Max); }

  /// Erases `it` from `table`, keeping its node (with the value reset, so that nothing it held
  /// is kept alive) while fewer than Max are kept.
  void erase(Table& table, typename Table::const_iterator it) {
    if (nodes_.size() == Max) {
      table.erase(it);
      return;
    }
    auto node = table.extract(it);
    if constexpr (is_map) {
      node.mapped() = {};
    } else {
      node.value() = {};
    }
    nodes_.push_back(std::move(node));
  }

  /// Inserts `key`, for a map with its value made from `value...` (default: a value-initialised
  /// one), reusing a kept node if there is one. `key` must not be in `table`. Returns the
  /// inserted entry.
  template <class Key, class... Value>
  typename Table::iterator insert(Table& table, Key&& key, Value&&... value) {
    if (nodes_.empty()) {
      if constexpr (is_map) {
        return table.try_emplace(std::forward<Key>(key), std::forward<Value>(value)...).first;
      } else {
        return table.insert(std::forward<Key>(key)).first;
      }
    }
    auto node = std::move(nodes_.back());
    nodes_.pop_back();
    if constexpr (is_map) {
      node.key() = std::forward<Key>(key);
      node.mapped() = typename Table::mapped_type(std::forward<Value>(value)...);
    } else {
      node.value() = std::forward<Key>(key);
    }
    return table.insert(std::move(node)).position;
  }

 private:
  std::vector<node_type> nodes_;
};

}  // namespace dlock::detail
