#pragma once
// What `pgfleet wait` and `pgfleet run --wait` tell a user about the jobs
// they wait for, and what Ctrl-C does while they wait.

#include <string>
#include <vector>

#include "cli/queries.h"

namespace pgfleet::cli {

// One line (no newline) about where a job is now: "job 7: pending: <why>",
// "job 7: attempt 1 failed (exit code 3); retrying in 1.0 s", "job 7:
// attempt 2 running on h1", "job 7: failed: exit code 3".
std::string DescribeWaitedJob(const WaitedJob& j);

// What a command waiting for one finished job exits with: 0 when it
// succeeded, its exit code, 128 + its signal, else 1.
int ExitCodeOfFinished(const WaitedJob& j);

// From now on Ctrl-C (SIGINT) prints `message` on stderr and exits 130;
// with `then_run` (an argv, e.g. {"pgfleet", "stop", "7"}), it execs this
// program with it instead of exiting. Call once per process.
void OnInterrupt(const std::string& message, const std::vector<std::string>& then_run = {});

}  // namespace pgfleet::cli
