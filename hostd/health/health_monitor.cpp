#include "hostd/health/health_monitor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <set>

namespace pgfleet::hostd::health {

using Clock = std::chrono::steady_clock;

HealthMonitor::HealthMonitor(std::vector<Supervisor*> supervisors,
                             std::shared_ptr<HealthProber> prober, HealthMonitorOptions options)
    : supervisors_(std::move(supervisors)), prober_(std::move(prober)), options_(options) {}

HealthMonitor::~HealthMonitor() {
  {
    util::MutexLock lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HealthMonitor::Start() {
  thread_ = std::thread([this] { Run(); });
}

void HealthMonitor::Run() {
  for (;;) {
    try {
      Tick();
    } catch (const std::exception& e) {
      spdlog::error("health checks: {}", e.what());  // the next tick tries again
    }
    util::MutexLock lock(stop_mu_);
    if (stop_cv_.wait_for(lock, options_.tick, [this] {
          stop_mu_.AssertHeld();
          return stopping_;
        })) {
      return;
    }
  }
}

int HealthMonitor::InFlight() const {
  util::MutexLock lock(results_->mu);
  return results_->in_flight;
}

void HealthMonitor::Apply(const Key& key, Watched& w, const ProbeResult& result,
                          Clock::time_point now) {
  if (!w.tracker.Result(result.passed, now) || w.stopped) return;
  const model::Health health = w.tracker.health();
  Supervisor& sup = *supervisors_[key.supervisor];
  if (health == model::Health::kUnhealthy) {
    spdlog::warn("job={} attempt={} unhealthy after {} failed health checks: {}", key.job,
                 key.attempt, w.tracker.consecutive_failures(), result.output);
  } else {
    spdlog::info("job={} attempt={} {}", key.job, key.attempt, model::ToString(health));
  }
  sup.ReportHealth(key.job, key.attempt, key.uid, health, result.output);
  if (w.tracker.Failed()) {
    w.stopped =
        sup.StopUnhealthy(key.job, key.attempt, key.uid,
                          model::HealthStopReason(w.tracker.consecutive_failures(), result.output));
  }
}

void HealthMonitor::Tick() {
  util::MutexLock lock(mu_);
  std::vector<std::pair<Key, ProbeResult>> done;
  {
    util::MutexLock r(results_->mu);
    done.swap(results_->done);
  }
  auto now = Clock::now();
  for (auto& [key, result] : done) {
    auto it = watched_.find(key);
    if (it != watched_.end()) Apply(key, it->second, result, now);
  }
  // The running attempts with a check, as each supervisor has them now.
  std::set<Key> live;
  std::vector<std::pair<Key, HealthTarget>> due;
  for (size_t i = 0; i < supervisors_.size(); ++i) {
    for (HealthTarget& t : supervisors_[i]->HealthTargets()) {
      Key key{i, t.job_id, t.attempt, t.uid};
      live.insert(key);
      auto it = watched_.find(key);
      if (it == watched_.end()) {
        it = watched_.emplace(key, Watched{model::HealthTracker(t.check, t.started)}).first;
      }
      if (!it->second.stopped && it->second.tracker.Due(now)) due.emplace_back(key, std::move(t));
    }
  }
  for (auto it = watched_.begin(); it != watched_.end();) {
    it = live.count(it->first) ? std::next(it) : watched_.erase(it);
  }
  // The longest overdue first: when checks are short of room, none starves.
  std::stable_sort(due.begin(), due.end(), [this](const auto& a, const auto& b) {
    mu_.AssertHeld();
    return watched_.at(a.first).tracker.next_due() < watched_.at(b.first).tracker.next_due();
  });
  for (auto& [key, target] : due) {
    Watched& w = watched_.at(key);
    if (prober_->Inline()) {
      w.tracker.Started(now);
      Apply(key, w, prober_->Probe(target), now);
      continue;
    }
    {
      util::MutexLock r(results_->mu);
      if (results_->in_flight >= options_.max_in_flight) break;  // a later tick
      ++results_->in_flight;
    }
    w.tracker.Started(now);
    // A thread per check: it may join the job's network namespace, which
    // then ends with it. It holds only what outlives the monitor.
    std::thread([prober = prober_, results = results_, key = key, target = std::move(target)] {
      ProbeResult result;
      try {
        result = prober->Probe(target);
      } catch (const std::exception& e) {
        result = {false, BoundOutput(std::string("the check could not run: ") + e.what())};
      }
      util::MutexLock r(results->mu);
      results->done.emplace_back(key, std::move(result));
      --results->in_flight;
    }).detach();
  }
}

}  // namespace pgfleet::hostd::health
