// schedulerd's backoff for formations whose pass keeps failing.

#include "schedulerd/formation_backoff.h"

#include <gtest/gtest.h>

namespace pgfleet::schedulerd {
namespace {

using namespace std::chrono_literals;
using Clock = FormationBackoff::Clock;

TEST(FormationBackoff, AFailingFormationWaitsLongerEachTimeUpToAMinuteAndLogsRarely) {
  FormationBackoff b;
  Clock::time_point t{};
  EXPECT_TRUE(b.Due(7, t));
  auto f = b.Failed(7, t);
  EXPECT_EQ(f.failures, 1);
  EXPECT_EQ(f.wait, 100ms);
  EXPECT_TRUE(f.log);
  EXPECT_FALSE(b.Due(7, t + 99ms));
  EXPECT_TRUE(b.Due(7, t + 100ms));
  EXPECT_TRUE(b.Due(8, t)) << "another formation is not held back";
  std::chrono::milliseconds last{};
  int logged = 1;
  for (int i = 2; i <= 40; ++i) {
    t += 1s;
    f = b.Failed(7, t);
    EXPECT_GE(f.wait, last);
    last = f.wait;
    logged += f.log;
  }
  EXPECT_EQ(last, 60000ms);
  EXPECT_LE(logged, 3) << "logged on the first failure, then at most every 30 s";
  EXPECT_TRUE(b.Succeeded(7));
  EXPECT_FALSE(b.Succeeded(7));
  EXPECT_TRUE(b.Due(7, t));
  EXPECT_EQ(b.Failed(7, t).wait, 100ms) << "a new run of failures starts over";
}

}  // namespace
}  // namespace pgfleet::schedulerd
