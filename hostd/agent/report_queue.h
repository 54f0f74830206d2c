#pragma once
// The reports an agent has yet to deliver, and its wake-ups: the one part of
// the agent any thread may call. Supervisors and API handlers Push reports
// and Wake it; the agent's own thread takes batches, puts back what a failed
// delivery left, and waits here for the next step.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <vector>

#include "core/model/report.h"
#include "core/util/mutex.h"

namespace pgfleet::hostd {

class ReportQueue {
 public:
  // Called after every Push and Wake, besides waking WaitUntil (a runner of
  // many agents wakes its worker with it). Set before any thread pushes.
  void SetWaker(std::function<void()> waker) { waker_ = std::move(waker); }

  // Any thread; never blocks on the database.
  void Push(model::Report report);
  void Wake();

  // The agent's thread only.
  // Up to `max` reports, oldest first.
  std::vector<model::Report> TakeBatch(size_t max);
  // Puts reports [from, end) of a batch taken back at the front, in order.
  void PutBack(std::vector<model::Report>& batch, size_t from);
  // True (once) when Push or Wake was called since the last call.
  bool TakeWake();
  // Waits until `deadline`, a Push or Wake, or `stop` (checked when woken).
  void WaitUntil(std::chrono::steady_clock::time_point deadline, const std::atomic<bool>& stop);
  size_t size() const;

 private:
  void Notify();

  std::function<void()> waker_;
  mutable util::Mutex mu_;
  util::CondVar cv_;
  std::deque<model::Report> queue_ GUARDED_BY(mu_);  // sent oldest first
  bool wake_ GUARDED_BY(mu_) = false;
};

}  // namespace pgfleet::hostd
