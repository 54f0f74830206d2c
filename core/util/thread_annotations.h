#pragma once
// Clang's thread-safety attributes (-Wthread-safety), no-ops elsewhere: what
// each lock guards and which functions need it held, checked by the
// compiler in the clang build (scripts/fuzz builds with
// -Werror=thread-safety). Use them with util::Mutex (core/util/mutex.h).
// Model: leveldb's port/thread_annotations.h.

#if defined(__clang__)
#define PGFLEET_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define PGFLEET_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) PGFLEET_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY PGFLEET_THREAD_ANNOTATION(scoped_lockable)
// A member only read or written with the lock held.
#define GUARDED_BY(x) PGFLEET_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) PGFLEET_THREAD_ANNOTATION(pt_guarded_by(x))
// A function its callers call with the lock held.
#define REQUIRES(...) PGFLEET_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// A function that takes the lock itself: callers must not hold it.
#define EXCLUDES(...) PGFLEET_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) PGFLEET_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) PGFLEET_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) PGFLEET_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) PGFLEET_THREAD_ANNOTATION(assert_capability(x))
// Only where the analysis cannot follow (say why at the use).
#define NO_THREAD_SAFETY_ANALYSIS PGFLEET_THREAD_ANNOTATION(no_thread_safety_analysis)
