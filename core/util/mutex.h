#pragma once
// A mutex the compiler checks (thread_annotations.h): util::Mutex, held by a
// util::MutexLock for a scope; util::CondVar waits on a MutexLock. Members
// say GUARDED_BY(mu_), functions called with it held REQUIRES(mu_).
// Model: leveldb's port::Mutex and util/mutexlock.h.

#include <condition_variable>
#include <mutex>

#include "core/util/thread_annotations.h"

namespace pgfleet::util {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds it (no run-time check).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  std::mutex mu_;
};

// Holds mu for its scope; unlock()/lock() in between (CondVar's waits do).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  void lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }
  void unlock() RELEASE() {
    held_ = false;
    mu_.unlock();
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// Waits release and retake the MutexLock given (wait, wait_for, wait_until
// with a predicate, as std::condition_variable's).
using CondVar = std::condition_variable_any;

}  // namespace pgfleet::util
