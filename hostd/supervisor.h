#pragma once
// hostd's supervisor: starts each (job, attempt) at most once through the
// driver, waits for it, applies the stop policy (SIGTERM, grace, SIGKILL), and
// hands every state change to a report sink. Driver-agnostic.
//
// At most once: an attempt's directory <data_dir>/jobs/<job>-<attempt> is
// created with mkdir before the start, so neither a second dispatch nor a
// restarted hostd can start the same attempt again.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hostd/drivers/driver.h"

namespace pgfleet::hostd {

inline constexpr size_t kOutputTailBytes = 4096;

struct JobInfo {
  int64_t job_id = 0;
  int attempt = 0;
  pid_t pid = 0;
  std::string state;  // starting, running, stopping, exited, start_failed
  std::string log_path;
  std::chrono::steady_clock::time_point started;
  std::optional<ExitStatus> exit;
  nlohmann::json ToJson() const;
};

class Supervisor {
 public:
  enum class StartResult {
    kStarted,       // started now
    kAlready,       // this hostd already started (or finished) this attempt
    kFailed,        // the driver could not start it (start_failed reported)
    kPreviousLife,  // started by an earlier hostd process on this data dir; not restarted
  };
  using Sink = std::function<void(nlohmann::json report)>;

  Supervisor(Driver& driver, std::string data_dir, std::string host_id, Sink sink);
  ~Supervisor();

  StartResult Start(int64_t job_id, int attempt, const spec::JobSpec& spec, std::string* error);
  // Stops the attempt (0 = the job's latest attempt here): SIGTERM, the job's
  // grace period, then SIGKILL. Returns immediately. An attempt not started yet
  // is marked so it never starts, and reported start_failed. False if nothing known.
  bool Stop(int64_t job_id, int attempt);
  // Fencing: the attempt was superseded; SIGKILL it now.
  void Kill(int64_t job_id, int attempt);

  bool Known(int64_t job_id, int attempt) const;
  bool Live(int64_t job_id, int attempt) const;
  std::vector<JobInfo> List() const;
  std::optional<JobInfo> Latest(int64_t job_id) const;
  // Log file of the attempt (0 = latest found on disk); empty if none.
  std::string LogPath(int64_t job_id, int attempt) const;
  // Live attempts started before t (for the reconcile's superseded check).
  std::vector<std::pair<int64_t, int>> LiveStartedBefore(
      std::chrono::steady_clock::time_point t) const;
  size_t LiveCount() const;

 private:
  struct Record;
  using Key = std::pair<int64_t, int>;
  std::string AttemptDir(int64_t job_id, int attempt) const;
  void WaitFor(std::shared_ptr<Record> rec);
  void StopRecord(std::shared_ptr<Record> rec, int grace_seconds, bool immediate);
  void Prune();

  Driver& driver_;
  std::string data_dir_;
  std::string host_id_;
  Sink sink_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, std::shared_ptr<Record>> records_;
  int threads_ = 0;  // waiter and stopper threads still running
};

}  // namespace pgfleet::hostd
