#pragma once
// What the container child (container_child.h) and the container's init
// (container_init.h) tell the driver on the plan's sync socket: one report
// per message, {step, errno}. Shared by the child's two parts and the parent.

#include <cstdint>

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
  kFork,
  // Not a failure: the child has set up its container (and made its user
  // namespace, if it has one) and waits for the parent to write its id maps
  // and take hold of its disk, then to send one byte.
  kPaused,
  // Not a failure: sent by the job's process just before its exec; the
  // parent reads its pid (as the host sees it) from the message's
  // credentials (SO_PASSCRED).
  kForked,
};

struct ChildReport {
  int32_t step;
  int32_t err;
};

// In the child: sends {step, err} on the plan's sync socket and exits 127.
[[noreturn]] void ChildFail(const ChildPlan& p, Step step, int err);

}  // namespace pgfleet::hostd::container
