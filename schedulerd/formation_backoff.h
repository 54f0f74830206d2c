#pragma once
// Formations whose pass keeps failing (a row written before a rule existed,
// a template the database now refuses): each waits before it is tried again,
// 100 ms doubling to 60 s, and is logged on its first failure and then at
// most once every 30 s, so no input makes a scheduler spin or flood its log.
// Pure: the scheduler loop owns one and gives it the time.

#include <algorithm>
#include <chrono>
#include <map>

#include "core/util/backoff.h"

namespace pgfleet::schedulerd {

class FormationBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kFirstWait{100};
  static constexpr std::chrono::milliseconds kMaxWait{60000};
  static constexpr std::chrono::seconds kLogEvery{30};

  // Whether the formation may be worked at `now` (true unless it failed and
  // its wait has not passed).
  bool Due(int id, Clock::time_point now) const {
    auto it = failing_.find(id);
    return it == failing_.end() || now >= it->second.next_try;
  }

  struct Failure {
    int failures = 0;                  // in a row, this one included
    std::chrono::milliseconds wait{};  // until the next try
    bool log = false;                  // the first, or 30 s since the last logged
  };
  Failure Failed(int id, Clock::time_point now) {
    State& s = failing_[id];
    ++s.failures;
    const auto wait = util::DoublingDelay(kFirstWait, kMaxWait, s.failures - 1);
    s.next_try = now + wait;
    bool log = s.failures == 1 || now - s.last_log >= kLogEvery;
    if (log) s.last_log = now;
    return {s.failures, wait, log};
  }

  // A pass that worked: true when the formation had been failing.
  bool Succeeded(int id) { return failing_.erase(id) > 0; }

 private:
  struct State {
    int failures = 0;
    Clock::time_point next_try{}, last_log{};
  };
  std::map<int, State> failing_;
};

}  // namespace pgfleet::schedulerd
