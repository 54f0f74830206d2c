#pragma once
// The doubling delay the daemons wait before trying something again: first,
// then twice that each time, never more than cap. step 0 is the first wait.

#include <algorithm>
#include <chrono>

namespace pgfleet::util {

inline std::chrono::milliseconds DoublingDelay(std::chrono::milliseconds first,
                                               std::chrono::milliseconds cap, int step) {
  const int shift = std::clamp(step, 0, 30);  // 2^30 of any first wait is past any cap
  return std::min<std::chrono::milliseconds>(first * (1LL << shift), cap);
}

}  // namespace pgfleet::util
