// dlock/version.hpp — the library's version.
#pragma once

namespace dlock {

/// The version of dlock these headers belong to, "MAJOR.MINOR.PATCH".
inline constexpr const char* version = "0.1.0";

}  // namespace dlock
