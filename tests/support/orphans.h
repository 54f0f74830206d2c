#pragma once
// Processes a test watches but did not start: the jobs and shims that
// outlive the hostd that started them. A test that makes itself a child
// subreaper (prctl PR_SET_CHILD_SUBREAPER) inherits them when their parent
// dies; these say whether one is still the process first seen, and reap them
// at the end instead of leaving zombies to an init that may not.

#include <sys/types.h>

#include <chrono>
#include <cstdint>

namespace pgfleet::testing {

// True while pid is the process first seen with start_time (its
// hostd::attempt::ProcStartTime) and is not a zombie: an orphan this test
// inherited lingers as a zombie until it is reaped.
bool SameProcessAlive(pid_t pid, int64_t start_time);

// Reaps this test's exited children until it has none left, waiting up to
// `patience` in all for those still running.
void ReapOrphans(std::chrono::milliseconds patience);

}  // namespace pgfleet::testing
