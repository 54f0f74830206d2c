#include "hostd/agent/report_queue.h"

namespace pgfleet::hostd {

void ReportQueue::Push(model::Report report) {
  {
    util::MutexLock lock(mu_);
    queue_.push_back(std::move(report));
    wake_ = true;
  }
  Notify();
}

void ReportQueue::Wake() {
  {
    util::MutexLock lock(mu_);
    wake_ = true;
  }
  Notify();
}

void ReportQueue::Notify() {
  cv_.notify_one();
  if (waker_) waker_();
}

std::vector<model::Report> ReportQueue::TakeBatch(size_t max) {
  std::vector<model::Report> batch;
  util::MutexLock lock(mu_);
  while (!queue_.empty() && batch.size() < max) {
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return batch;
}

void ReportQueue::PutBack(std::vector<model::Report>& batch, size_t from) {
  util::MutexLock lock(mu_);
  for (size_t i = batch.size(); i > from; --i) queue_.push_front(std::move(batch[i - 1]));
}

bool ReportQueue::TakeWake() {
  util::MutexLock lock(mu_);
  bool was = wake_;
  wake_ = false;
  return was;
}

void ReportQueue::WaitUntil(std::chrono::steady_clock::time_point deadline,
                            const std::atomic<bool>& stop) {
  util::MutexLock lock(mu_);
  cv_.wait_until(lock, deadline, [&] {
    mu_.AssertHeld();
    return wake_ || stop;
  });
  wake_ = false;
}

size_t ReportQueue::size() const {
  util::MutexLock lock(mu_);
  return queue_.size();
}

}  // namespace pgfleet::hostd
