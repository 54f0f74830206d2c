#include "hostd/hollow/sim.h"

#include <signal.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/util/mutex.h"

namespace pgfleet::hostd {

using Key = std::pair<int64_t, int>;

// A runner's attempts, shared with the timer (which holds them weakly).
struct SimTimer::Attempts {
  struct Live {
    Clock::time_point deadline;
    int exit_code = 0;
    int signal = 0;              // set by a stop or kill: the attempt ends with it
    uint64_t seq = 0;            // only the timer entry with this number ends it
    AttemptRunner::Ended ended;  // set by Await
  };
  util::Mutex mu;
  std::set<Key> claimed GUARDED_BY(mu);
  std::map<Key, Live> live GUARDED_BY(mu);  // started, not ended

  // The timer entry `seq` of `key` is due: end the attempt if it is still the current one.
  void Fire(const Key& key, uint64_t seq) {
    AttemptRunner::Ended ended;
    attempt::Outcome outcome;
    {
      util::MutexLock lock(mu);
      auto it = live.find(key);
      if (it == live.end() || it->second.seq != seq || !it->second.ended) return;
      if (it->second.signal) {
        outcome.status.signal = it->second.signal;
      } else {
        outcome.status.exit_code = it->second.exit_code;
      }
      ended = std::move(it->second.ended);
      live.erase(it);
    }
    ended(std::move(outcome));
  }
};

namespace {

std::string EnvOr(const model::JobSpec& spec, const char* key, const char* fallback) {
  auto it = spec.env.find(key);
  return it == spec.env.end() ? fallback : it->second;
}

}  // namespace

SimJob ParseSimJob(const model::JobSpec& spec) {
  SimJob job;
  std::string seconds = EnvOr(spec, kSimSecondsEnv, "0");
  std::string field = std::string("env.") + kSimSecondsEnv;
  char* end = nullptr;
  errno = 0;
  double s = std::strtod(seconds.c_str(), &end);
  // Up to a year: beyond that the microsecond count would be a mistake anyway.
  if (seconds.empty() || *end != '\0' || errno != 0 || !std::isfinite(s) || s < 0 || s > 3.2e7) {
    throw model::SpecError(
        field, field + " must be a decimal number of seconds >= 0 (got \"" + seconds + "\")");
  }
  job.duration = std::chrono::microseconds(static_cast<int64_t>(std::llround(s * 1e6)));
  std::string code = EnvOr(spec, kSimExitCodeEnv, "0");
  field = std::string("env.") + kSimExitCodeEnv;
  errno = 0;
  long c = std::strtol(code.c_str(), &end, 10);
  if (code.empty() || *end != '\0' || errno != 0 || c < 0 || c > 255) {
    throw model::SpecError(field,
                           field + " must be an integer from 0 to 255 (got \"" + code + "\")");
  }
  job.exit_code = static_cast<int>(c);
  return job;
}

SimTimer& SimTimer::Shared() {
  static SimTimer timer;
  return timer;
}

SimTimer::SimTimer() : thread_([this] { Loop(); }) {}

SimTimer::~SimTimer() {
  {
    util::MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SimTimer::At(Clock::time_point deadline, std::weak_ptr<Attempts> owner, Key key,
                  uint64_t seq) {
  bool earliest;
  {
    util::MutexLock lock(mu_);
    earliest = queue_.empty() || deadline < queue_.top().deadline;
    queue_.push(Entry{deadline, std::move(owner), key, seq});
  }
  if (earliest) cv_.notify_one();
}

void SimTimer::Loop() {
  std::vector<Entry> due;
  util::MutexLock lock(mu_);
  while (!stop_) {
    if (queue_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto now = Clock::now();
    // A copy: wait_until reads its deadline again after waking, and an At()
    // meanwhile may have moved the queue's storage (found by ASan).
    const Clock::time_point next = queue_.top().deadline;
    if (next > now) {
      cv_.wait_until(lock, next);
      continue;
    }
    while (!queue_.empty() && queue_.top().deadline <= now) {
      due.push_back(queue_.top());
      queue_.pop();
    }
    lock.unlock();
    {
      util::MutexLock fire(fire_mu_);
      for (auto& e : due) {
        if (auto owner = e.owner.lock()) owner->Fire(e.key, e.seq);
      }
    }
    due.clear();
    lock.lock();
  }
}

SimRunner::SimRunner(SimTimer& timer)
    : timer_(timer), attempts_(std::make_shared<SimTimer::Attempts>()) {}

SimRunner::~SimRunner() {
  timer_.Exclusive([this] { attempts_.reset(); });
}

// Nothing outlives the process, so no claim can be another database's.
AttemptRunner::Claim SimRunner::ClaimAttempt(int64_t job_id, int attempt, const std::string&,
                                             std::string*) {
  util::MutexLock lock(attempts_->mu);
  return attempts_->claimed.insert({job_id, attempt}).second ? Claim::kClaimed : Claim::kTaken;
}

bool SimRunner::Start(const attempt::ShimRequest& req, Started* out, std::string* error) {
  SimJob job;
  try {
    job = ParseSimJob(req.spec);
  } catch (const model::SpecError& e) {
    *error = e.what();
    return false;
  }
  util::MutexLock lock(attempts_->mu);
  auto& live = attempts_->live[{req.job_id, req.attempt}];
  live.deadline = SimTimer::Clock::now() + job.duration;
  live.exit_code = job.exit_code;
  *out = Started{};
  return true;
}

void SimRunner::Await(int64_t job_id, int attempt, Ended ended) {
  util::MutexLock lock(attempts_->mu);
  auto it = attempts_->live.find({job_id, attempt});
  if (it == attempts_->live.end()) return;
  it->second.ended = std::move(ended);
  timer_.At(it->second.deadline, attempts_, it->first, it->second.seq);
}

void SimRunner::Signal(int64_t job_id, int attempt, const Started&, int shim_signal) {
  util::MutexLock lock(attempts_->mu);
  auto it = attempts_->live.find({job_id, attempt});
  if (it == attempts_->live.end()) return;
  auto& live = it->second;
  if (live.signal == SIGKILL) return;  // nothing comes after a kill
  live.signal = shim_signal == attempt::kKillSignal ? SIGKILL : SIGTERM;
  live.deadline = SimTimer::Clock::now();
  ++live.seq;
  if (live.ended) timer_.At(live.deadline, attempts_, it->first, live.seq);
}

health::ProbeResult SimProber::Probe(const HealthTarget& target) {
  const auto& c = target.check;
  if (c.type == model::HealthCheckType::kCommand && !c.command.empty() && c.command[0] == "false") {
    return {false, "sim: false fails"};
  }
  return {true, "sim: passed"};
}

}  // namespace pgfleet::hostd
