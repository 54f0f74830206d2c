#pragma once
// Stop requests to hosts (POST /v1/jobs/ID/stop), off the scheduler's loop.
//
// The loop reads the jobs the database wants stopped (one statement) and
// hands them over; one sender thread per host with stops to send posts them,
// so a host that accepts connections but never answers holds up only its own
// stops, never a pass or another host. A stop is sent again only after a
// backoff (1 s doubling to 30 s) while the database still wants it, and at
// once when it becomes a force stop. A stop that never arrives is not lost:
// hostd's reconcile reads desired_state and stops the job itself.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/metrics/metrics.h"
#include "core/net/client_pool.h"
#include "core/util/mutex.h"
#include "schedulerd/store.h"

namespace pgfleet::schedulerd {

class StopForwarder {
 public:
  using Clock = std::chrono::steady_clock;
  // pool and metrics must outlive this.
  StopForwarder(net::ClientPool& pool, int timeout_seconds, metrics::Registry& metrics);
  // Waits for the senders (each request bounded by its timeout).
  ~StopForwarder();
  StopForwarder(const StopForwarder&) = delete;
  StopForwarder& operator=(const StopForwarder&) = delete;

  // All the stops the database wants now: those not sent within their
  // backoff are queued for their host's sender; those no longer wanted are
  // forgotten. Returns at once.
  void Forward(const std::vector<store::StopToForward>& stops, Clock::time_point now);

  // Requests posted so far (for tests and metrics).
  int64_t sent() const;

 private:
  void Sender(const std::string& host);
  void Post(const store::StopToForward& s);

  struct Sent {
    Clock::time_point next_try;  // counted from when it was last posted
    int tries = 0;
    bool force = false;
    bool queued = false;  // waiting in its host's queue: not queued twice
  };

  net::ClientPool& pool_;
  int timeout_seconds_;
  metrics::Registry& metrics_;
  mutable util::Mutex mu_;
  util::CondVar idle_;  // a sender ended
  std::map<std::pair<int64_t, int>, Sent> sent_ GUARDED_BY(mu_);
  struct HostQueue {
    std::deque<store::StopToForward> stops;
    bool sending = false;  // its sender thread runs
  };
  std::map<std::string, HostQueue> queues_ GUARDED_BY(mu_);
  int senders_ GUARDED_BY(mu_) = 0;
  int64_t posted_ GUARDED_BY(mu_) = 0;
};

}  // namespace pgfleet::schedulerd
