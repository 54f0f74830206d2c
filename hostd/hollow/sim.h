#pragma once
// The "sim" driver: a job that runs without a process, for hollow hosts
// (hollow.h) and scale tests. A job "runs" for PGFLEET_SIM_SECONDS seconds
// (its spec's env; a decimal, default 0) and exits with PGFLEET_SIM_EXIT_CODE
// (default 0). Stop ends it at once with signal 15, kill with signal 9.
//
// A sim attempt costs a map entry and a timer entry: no thread, no process,
// no file. Every SimRunner of a process shares one timer thread (SimTimer),
// which runs the attempts' ends in deadline order. Claims (the at-most-once
// gate, attempt_runner.h) live in memory for the runner's lifetime.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/model/job_spec.h"
#include "core/util/mutex.h"
#include "hostd/attempt/attempt_runner.h"
#include "hostd/health/health_prober.h"

namespace pgfleet::hostd {

inline constexpr const char* kSimDriver = "sim";
inline constexpr const char* kSimSecondsEnv = "PGFLEET_SIM_SECONDS";
inline constexpr const char* kSimExitCodeEnv = "PGFLEET_SIM_EXIT_CODE";

// What a sim job does, from its spec.
struct SimJob {
  std::chrono::microseconds duration{0};
  int exit_code = 0;
};
// Throws model::SpecError naming the env key when a value is malformed
// (seconds: a decimal >= 0; exit code: an integer 0..255).
SimJob ParseSimJob(const model::JobSpec& spec);

// Health checks of sim jobs (jobs.health_check): there is no process to
// check, so every check passes at once ("sim: passed"), but a command check
// whose command[0] is "false" fails ("sim: false fails"): the way to make a
// sim replica unhealthy (it is then restarted, as any).
class SimProber : public health::HealthProber {
 public:
  health::ProbeResult Probe(const HealthTarget& target) override;
  bool Inline() const override { return true; }
};

class SimRunner;

// One thread that fires the deadlines of every SimRunner that uses it.
class SimTimer {
 public:
  using Clock = std::chrono::steady_clock;
  // The process's timer, started on first use.
  static SimTimer& Shared();
  SimTimer();
  ~SimTimer();
  SimTimer(const SimTimer&) = delete;
  SimTimer& operator=(const SimTimer&) = delete;

  struct Attempts;  // a runner's live attempts (sim.cpp)
  // At `deadline`, tells owner that attempt `key`'s deadline number `seq` is
  // due (an owner that is gone by then is skipped).
  void At(Clock::time_point deadline, std::weak_ptr<Attempts> owner, std::pair<int64_t, int> key,
          uint64_t seq);
  // Returns once no end is being delivered; holds off new ones while `fn` runs.
  template <typename Fn>
  void Exclusive(Fn fn) {
    util::MutexLock lock(fire_mu_);
    fn();
  }

 private:
  struct Entry {
    Clock::time_point deadline;
    std::weak_ptr<Attempts> owner;
    std::pair<int64_t, int> key;
    uint64_t seq = 0;
    bool operator>(const Entry& o) const { return deadline > o.deadline; }
  };
  void Loop();

  util::Mutex mu_;
  util::CondVar cv_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  util::Mutex fire_mu_;  // held while ends are delivered
  std::thread thread_;
};

class SimRunner : public AttemptRunner {
 public:
  explicit SimRunner(SimTimer& timer = SimTimer::Shared());
  // Waits for an end of its own being delivered; later deadlines do nothing.
  ~SimRunner() override;

  Claim ClaimAttempt(int64_t job_id, int attempt, const std::string& uid,
                     std::string* error) override;
  void RecordStartFailed(int64_t, int, const std::string&) override {}
  bool Start(const attempt::ShimRequest& req, Started* out, std::string* error) override;
  void Await(int64_t job_id, int attempt, Ended ended) override;
  void Signal(int64_t job_id, int attempt, const Started& started, int shim_signal) override;
  std::string OutputTail(int64_t, int) const override { return ""; }
  void MarkReported(int64_t, int, const std::string&) override {}
  std::string LogPath(int64_t, int) const override { return ""; }
  bool RunsProcesses() const override { return false; }

 private:
  SimTimer& timer_;
  std::shared_ptr<SimTimer::Attempts> attempts_;
};

}  // namespace pgfleet::hostd
