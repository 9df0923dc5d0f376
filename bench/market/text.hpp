// What the marketplace's runner (market.cpp) and its reports (report.cpp) share: number
// formatting and facts about the variants. Internal to bench/market.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dlock::market::detail {

/// `v` with `decimals` digits after the point.
std::string format_number(double v, int decimals);
/// 1234567 -> "1,234,567".
std::string grouped(std::uint64_t v);
/// Milliseconds with enough digits to tell small values apart; "-" for none.
std::string ms_text(double ms);
/// "5/1": listers/buyers.
std::string load_text(int listers, int buyers);

/// The row of the book's Table 6.3 a variant compares with ("no lock", "with lock",
/// "fine-grained lock"), or "" if none (script, no-lock, unknown names).
std::string_view book_variant(std::string_view variant);

/// Whether a variant runs without any lock on purpose (no-lock): its books need not balance, and
/// an audit that finds they do not is a measurement, not a failure.
bool unsafe_by_design(std::string_view variant);

}  // namespace dlock::market::detail
