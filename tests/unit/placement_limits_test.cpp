// Limits ahead of placement (core/placement/limits.h): a formation's
// max_running and owners' quotas keep the longest prefix in claim order
// that fits, per formation and per owner; a job that does not fit keeps
// those behind it waiting, with the limit's words.

#include <gtest/gtest.h>

#include <vector>

#include "core/placement/limits.h"

namespace pgfleet::placement {
namespace {

TEST(ApplyLimits, WithoutLimitsEveryJobIsKept) {
  auto s = ApplyLimits({{1, "a", 100, 64}, {2, "b", 100, 64}}, Limits{"f"});
  EXPECT_EQ((std::vector<int64_t>{1, 2}), s.kept);
  EXPECT_TRUE(s.waiting.empty());
}

TEST(ApplyLimits, MaxRunningCountsWhatIsInFlight) {
  Limits l{"web", 3, 2};
  auto s = ApplyLimits({{1, "a", 1, 1}, {2, "a", 1, 1}, {3, "a", 1, 1}}, l);
  EXPECT_EQ((std::vector<int64_t>{1}), s.kept);
  EXPECT_EQ("waiting for max_running 3 of formation web", s.waiting.at(2));
  EXPECT_EQ(2u, s.waiting.size());
  l.live = 3;
  EXPECT_TRUE(ApplyLimits({{1, "a", 1, 1}}, l).kept.empty());
  l.live = 7;  // above a lowered limit: nothing, never negative room
  EXPECT_TRUE(ApplyLimits({{1, "a", 1, 1}}, l).kept.empty());
}

TEST(ApplyLimits, AnOwnersQuotaKeepsAPrefixAndABigJobIsNotOvertaken) {
  Limits l{"f"};
  OwnerQuota q;
  q.max_cpu = 1000;
  q.cpu = 200;
  l.owners["alice"] = q;
  auto s = ApplyLimits(
      {{1, "alice", 500, 1}, {2, "alice", 400, 1}, {3, "alice", 100, 1}, {4, "bob", 9999, 1}}, l);
  EXPECT_EQ((std::vector<int64_t>{1, 4}), s.kept);
  EXPECT_EQ("owner alice at quota: cpu 700 of 1000m in use (this job asks 400m)", s.waiting.at(2));
  EXPECT_EQ(s.waiting.at(2), s.waiting.at(3)) << "the small job behind waits too";
}

TEST(ApplyLimits, MemoryAndRunningQuotasSayWhichBinds) {
  Limits l{"f"};
  OwnerQuota q;
  q.max_memory = 100;
  q.max_running = 5;
  q.running = 5;
  l.owners["a"] = q;
  EXPECT_EQ("owner a at quota: running 5 of 5 jobs",
            ApplyLimits({{1, "a", 1, 1}}, l).waiting.at(1));
  l.owners["a"].running = 0;
  EXPECT_EQ("owner a at quota: memory 0 of 100 MiB in use (this job asks 200 MiB)",
            ApplyLimits({{1, "a", 1, 200}}, l).waiting.at(1));
}

}  // namespace
}  // namespace pgfleet::placement
