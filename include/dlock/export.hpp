// dlock/export.hpp — marks the names a shared libdlock exports. The library is compiled with
// hidden symbol visibility, so only what carries DLOCK_API (the public API) is visible to
// programs linking it; everything internal stays inside. Harmless for the static library.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define DLOCK_API __attribute__((visibility("default")))
#else
#define DLOCK_API
#endif
