#pragma once
// The container's init (container_child.h says what it does and why): run
// by the container child once it has set up the container, in that child,
// so under the same rules: async-signal-safe calls only.

#include "hostd/drivers/container/container_plan.h"

namespace pgfleet::hostd::container {

// Gives the child the init's title in place of the shim's command line and
// environment (what the job sees of its PID 1). Call first: it only writes
// this child's memory.
void NameInit(const ChildPlan& p);

// Forks the job (which execs p.argv) and is its init until it ends; exits
// with the job. On a failed fork, reports kFork (ChildFail).
[[noreturn]] void RunInit(ChildPlan& p);

}  // namespace pgfleet::hostd::container
