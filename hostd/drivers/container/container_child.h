#pragma once
// The container child: the code that runs in the cloned child between
// clone() and exec of the job, turning the child into the job's container
// by following a ChildPlan (container_plan.h), and then the container's
// init.
//
// The init: the cloned child stays PID 1 of the container (as `docker run
// --init`, tini) and forks the job, which execs in a session of its own.
// PID 1 of a PID namespace gets only the signals it has a handler for, so a
// job that was PID 1 ignored SIGTERM and every stop waited out its grace.
// The init has a handler for every catchable signal and forwards each to
// the job's process group, reaps orphans, and when the job ends writes its
// wait status to the plan's status pipe and exits (code: the job's, or
// 128 + its signal), which ends the container. It runs as the job's user,
// under the job's seccomp filter, with no descriptor but the status pipe.
//
// What must hold: the child is a copy of a multi-threaded process, so until
// exec it makes only async-signal-safe calls (plain system calls): no
// allocation, no locks, no logging, no exceptions, no glibc wrappers that
// talk to other threads (setuid & co: raw syscalls instead). Anything that
// needs more is computed in the plan beforehand. On failure the child sends
// one ChildReport on the plan's sync socket and exits 127.
//
// Only the container driver (container.cpp) calls ChildMain (through clone)
// and DescribeFailure (in the parent, afterwards).

#include <cstdint>
#include <string>

#include "hostd/drivers/container/container_plan.h"
#include "hostd/drivers/container/container_report.h"

namespace pgfleet::hostd::container {


// The clone() entry point; arg is the ChildPlan. Waits on the sync socket
// for the parent's go (after it has put the child in the job's cgroup), then
// forks the job, which execs, and becomes its init. Returns only through _exit.
int ChildMain(void* arg);

// The parent's DriverError message for a failure the child reported.
std::string DescribeFailure(const ChildReport& report, const ChildPlan& plan);

}  // namespace pgfleet::hostd::container
