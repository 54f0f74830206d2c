#pragma once
// The container child: the code that runs in the cloned child between
// clone() and exec of the job, turning the child into the job's container
// by following a ChildPlan (container_plan.h).
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

namespace pgfleet::hostd::container {

// Where the child stopped when setting up the container failed. The child
// reports {step, errno}; the parent turns it into the DriverError message.
enum Step : int32_t {
  kPrivateMounts,
  kBindRoot,
  kReadOnlyRoot,
  kMountProc,
  kMountTmp,
  kMountDev,
  kMakeDevice,
  kMaskDataDir,
  kBindWorkDir,
  kMountDisk,
  kBindEtcFile,
  kPivotRoot,
  kDetachOldRoot,
  kChdirWorkDir,
  kSetHostname,
  kLoopbackUp,
  kRedirectStdio,
  kNewUserNamespace,
  kSetGroups,
  kSetGid,
  kDropBoundingSet,
  kSetUid,
  kSetCapabilities,
  kNoNewPrivs,
  kSeccomp,
  kExec,
  // Not a failure: the child has set up its container (and made its user
  // namespace, if it has one) and waits for the parent to write its id maps
  // and take hold of its disk, then to send one byte.
  kPaused,
};

struct ChildReport {
  int32_t step;
  int32_t err;
};

// The clone() entry point; arg is the ChildPlan. Waits on the sync socket
// for the parent's go (after it has put the child in the job's cgroup), then
// execs the job. Returns only through _exit.
int ChildMain(void* arg);

// The parent's DriverError message for a failure the child reported.
std::string DescribeFailure(const ChildReport& report, const ChildPlan& plan);

}  // namespace pgfleet::hostd::container
