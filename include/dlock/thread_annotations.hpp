// dlock/thread_annotations.hpp — clang thread-safety attributes for dlock's lock types, so
// `-Wthread-safety` can check code that uses them as it checks std::mutex. No-ops elsewhere.
#pragma once

#if defined(__clang__)
#define DLOCK_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define DLOCK_THREAD_ANNOTATION(x)
#endif

#define DLOCK_CAPABILITY(name) DLOCK_THREAD_ANNOTATION(capability(name))
#define DLOCK_SCOPED_CAPABILITY DLOCK_THREAD_ANNOTATION(scoped_lockable)
#define DLOCK_ACQUIRE(...) DLOCK_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define DLOCK_RELEASE(...) DLOCK_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define DLOCK_TRY_ACQUIRE(...) DLOCK_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define DLOCK_GUARDED_BY(x) DLOCK_THREAD_ANNOTATION(guarded_by(x))
#define DLOCK_REQUIRES(...) DLOCK_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
/// For code that deliberately does what the analysis forbids (a test unlocking a lock it does
/// not hold, to check that nothing happens).
#define DLOCK_NO_THREAD_SAFETY_ANALYSIS DLOCK_THREAD_ANNOTATION(no_thread_safety_analysis)
