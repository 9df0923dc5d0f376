#include "locks/runtime/renewal_plan.hpp"

#include <map>
#include <string_view>
#include <tuple>

namespace dlock::detail {

std::vector<renewal_batch> plan_renewals(const std::vector<std::shared_ptr<grant>>& watched,
                                         const std::function<route(const grant&)>& route_of,
                                         std::size_t batch) {
  std::map<std::tuple<route, std::string_view>, renewal_batch> open;
  std::vector<renewal_batch> out;
  for (const auto& g : watched) {
    const auto where = route_of(*g);
    auto [it, fresh] = open.try_emplace({where, g->kind.name()});
    if (fresh) {
      it->second.where = where;
      it->second.kind = &g->kind;
    }
    it->second.grants.push_back(g);
    if (it->second.grants.size() == batch) {
      out.push_back(std::move(it->second));
      open.erase(it);
    }
  }
  for (auto& [key, b] : open)
    out.push_back(std::move(b));
  std::stable_sort(out.begin(), out.end(), [](const renewal_batch& a, const renewal_batch& b) {
    return std::tie(a.where, a.kind) < std::tie(b.where, b.kind);
  });
  return out;
}

}  // namespace dlock::detail
