#pragma once
// The real attempt runner (attempt_runner.h): every attempt runs under its own
// shim process (shim.h, started through shim_client.h), in its directory
// <data_dir>/jobs/<job>-<attempt> (attempt_dir.h has the files).
//
// The claim is the directory's mkdir: neither a second dispatch nor a
// restarted hostd can start the same attempt again. Await waits on one
// thread per attempt for its shim to go, then reads the recorded outcome
// (attempt/outcome.h, FinalOutcome). Thread-safe.

#include <string>

#include "hostd/attempt/attempt_runner.h"
#include "hostd/shim/shim_client.h"

namespace pgfleet::hostd {

class ShimRunner : public AttemptRunner {
 public:
  // Creates <data_dir>/jobs when missing.
  explicit ShimRunner(const ShimClientOptions& options);

  Claim ClaimAttempt(int64_t job_id, int attempt, const std::string& uid,
                     std::string* error) override;
  void RecordStartFailed(int64_t job_id, int attempt, const std::string& error) override;
  bool Start(const attempt::ShimRequest& req, Started* out, std::string* error) override;
  void Await(int64_t job_id, int attempt, Ended ended) override;
  void Signal(int64_t job_id, int attempt, const Started& started, int shim_signal) override;
  std::string OutputTail(int64_t job_id, int attempt) const override;
  void MarkReported(int64_t job_id, int attempt, const std::string& uid) override;
  std::string LogPath(int64_t job_id, int attempt) const override;
  bool RunsProcesses() const override { return true; }

 private:
  const std::string data_dir_;
  const std::string container_host_;  // host id with the container driver, else ""
  ShimClient shims_;
};

}  // namespace pgfleet::hostd
