#pragma once
// Reading what hostds (this one or an earlier life) left in <data_dir>/jobs
// (attempt_dir.h has the layout): which attempts have not reached the
// database yet, how an attempt ended (the normal end of every attempt, and
// the end of one whose shim died), the latest attempt of a job on disk, and
// marking an attempt settled. Supervisor::Recover()
// (hostd/supervisor/recovery.cpp) re-attaches a new hostd to those attempts.
//
// What must hold: an attempt whose shim is gone always ends with exactly one
// outcome record, and its job is not left running unwatched (FinalOutcome).
// These functions keep no state; the supervisor, the shim runner and the
// collector call them,
// from any thread, for directories of attempts it owns.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hostd/attempt/attempt_dir.h"

namespace pgfleet::hostd {

// An attempt directory found on disk whose outcome was not yet delivered.
struct FoundAttempt {
  int64_t job_id = 0;
  int attempt = 0;
  std::string dir;
  attempt::State state;     // as read before shim_alive was sampled
  bool shim_alive = false;  // a shim holds the directory's lock
};
// Calls fn(job, attempt) for every <job>-<attempt> entry of <data_dir>/jobs.
void ForEachAttemptDir(const std::string& data_dir,
                       const std::function<void(int64_t job_id, int attempt)>& fn);

// Every <job>-<attempt> directory without state.reported.jsonl.
std::vector<FoundAttempt> UnsettledAttempts(const std::string& data_dir);

// How the attempt in dir ended, once its shim is gone: the recorded outcome,
// or, when the shim died without one, a "lost" outcome appended now, after
// SIGKILLing whatever is left of the job. container_host: the host id when
// the container driver ran the attempt ("" otherwise): a cgroup the shim
// left (it was killed before it could delete it) is emptied and deleted, and
// a network attachment it left (network/attachment.h) is taken down (DEL).
attempt::Outcome FinalOutcome(int64_t job_id, int attempt, const std::string& dir,
                              const std::string& container_host);

// The highest attempt of job_id that has a directory; 0 if none.
int LatestAttemptOnDisk(const std::string& data_dir, int64_t job_id);

// Renames state.jsonl to state.reported.jsonl: restarts skip the attempt.
// True when done or already done; false with *error.
bool MarkSettled(const std::string& dir, std::string* error);

}  // namespace pgfleet::hostd
