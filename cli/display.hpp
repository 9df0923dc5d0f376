// Showing names and owner ids, which are arbitrary bytes, without letting them forge output: a
// newline in a lock name must not start a new `ls` row, and JSON must stay valid (and lossless)
// whatever the bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dlock::cli {

/// True if `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(std::string_view s);

/// `s` for a terminal: valid UTF-8 printed as is, except that control characters and the
/// backslash are escaped (\n, \t, \\, \xNN), as is every byte that is not valid UTF-8.
std::string escaped(std::string_view s);

/// `words` as one shell command line: a word of letters, digits and `_./=:,+@%-` as it is, any
/// other in single quotes (a quote inside as '\''), so that it reads as what was run.
std::string shell_words(const std::vector<std::string>& words);

/// Standard base64 (RFC 4648, with padding).
std::string base64(std::string_view bytes);

/// Sets `object[field]` to `value`; when `value` is not valid UTF-8 (which JSON cannot carry),
/// to its `escaped` form, plus `object[field + "_base64"]` holding the raw bytes.
void set_text(nlohmann::json& object, const std::string& field, std::string_view value);

}  // namespace dlock::cli
