// Preemption in a formation's pass (schedulerd/preemption.h) on an in-memory
// fleet (FakeFleet): a job that fits nowhere has the pass stop the fewest
// lower-priority jobs on one host and waits for them with a reason; never
// for a job of equal priority, never again while its victims stop, and no
// statement at all when every job was placed or none could ever fit.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "formation_pass_fixture.h"

namespace pgfleet::schedulerd::testing_pass {
namespace {

class PreemptionPassTest : public FormationPassTest {
 protected:
  // Host h1 (4000m, 4000 MiB) full of four jobs of priority `running_priority`,
  // h2 (2000m) full of one; a pending job 9 of 2000m and `priority`.
  void FullFleet(int priority, int running_priority = 10) {
    fleet_.AddHost("h1", 4000, 4000, 4000);
    fleet_.s.hosts["h1"].view.memory_allocated = 4000;
    fleet_.AddHost("h2", 2000, 2000, 2000);
    fleet_.s.hosts["h2"].view.memory_allocated = 2000;
    for (int64_t id = 1; id <= 4; ++id) {
      fleet_.running.push_back({id, "h1", 1000, 1000, running_priority, true, "batch"});
    }
    fleet_.running.push_back({5, "h2", 2000, 2000, running_priority + 5, true, "batch"});
    fleet_.AddJob(9, 2000, 2000);
    fleet_.s.pending[9].request.priority = priority;
  }
};

TEST_F(PreemptionPassTest, AJobThatFitsNowhereStopsTheFewestLowerPriorityJobsAndWaits) {
  FullFleet(90);
  auto r = Run();
  EXPECT_FALSE(r.assigned);
  EXPECT_EQ(0u, Dispatched());
  // One job of 15 on h2 beats two of 10 on h1: fewest first.
  ASSERT_EQ(1u, fleet_.preempts.size());
  EXPECT_EQ(9, fleet_.preempts[0].first);
  EXPECT_EQ("h2", fleet_.preempts[0].second.first);
  EXPECT_EQ(std::vector<int64_t>{5}, fleet_.preempts[0].second.second);
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  EXPECT_EQ("waiting for 1 preempted jobs to stop on host h2 (5)", fleet_.reason_writes[0].at(9));
  EXPECT_EQ(1, fleet_.commits);
}

TEST_F(PreemptionPassTest, NeverForAJobOfEqualPriority) {
  FullFleet(10, 10);
  fleet_.running.back().priority = 10;
  Run();
  EXPECT_TRUE(fleet_.preempts.empty());
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  EXPECT_EQ("waiting for capacity: needs 2000m cpu, 2000 MiB memory",
            fleet_.reason_writes[0].at(9));
}

TEST_F(PreemptionPassTest, AJobWaitingForItsVictimsPreemptsNoMoreAndKeepsItsReason) {
  FullFleet(90);
  fleet_.waiting_for_victims = {9};
  fleet_.s.pending[9].reason = "waiting for 1 preempted jobs to stop on host h2 (5)";
  Run();
  EXPECT_TRUE(fleet_.preempts.empty());
  EXPECT_TRUE(fleet_.reason_writes.empty()) << "its reason stands";
}

TEST_F(PreemptionPassTest, KeepsTheFormationsBudget) {
  FullFleet(90);
  for (auto& j : fleet_.running) j.formation = "web";
  fleet_.may_lose = {{"web", 1}};
  fleet_.running.back().preemptible = false;  // h2's job stays: h1 would need two of web
  Run();
  EXPECT_TRUE(fleet_.preempts.empty());
}

TEST_F(PreemptionPassTest, OnePassPreemptsForSeveralJobsWithoutCountingRoomTwice) {
  FullFleet(90);
  fleet_.AddJob(10, 2000, 2000);
  fleet_.s.pending[10].request.priority = 80;
  fleet_.AddJob(11, 2000, 2000);
  fleet_.s.pending[11].request.priority = 70;
  fleet_.AddJob(12, 2000, 2000);  // no room left to make
  fleet_.s.pending[12].request.priority = 60;
  Run();
  ASSERT_EQ(3u, fleet_.preempts.size());
  EXPECT_EQ("h2", fleet_.preempts[0].second.first);
  EXPECT_EQ("h1", fleet_.preempts[1].second.first);
  EXPECT_EQ("h1", fleet_.preempts[2].second.first);
  EXPECT_EQ((std::vector<int64_t>{1, 2}), fleet_.preempts[1].second.second);
  EXPECT_EQ((std::vector<int64_t>{3, 4}), fleet_.preempts[2].second.second);
}

TEST_F(PreemptionPassTest, ARefusedPreemptionLeavesTheJobWaitingForCapacity) {
  FullFleet(90);
  fleet_.refuse_preempt = true;
  Run();
  EXPECT_EQ(1u, fleet_.preempts.size());
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  EXPECT_EQ("waiting for capacity: needs 2000m cpu, 2000 MiB memory",
            fleet_.reason_writes[0].at(9));
}

TEST_F(PreemptionPassTest, RunsNoStatementWhenEveryJobWasPlacedOrNoneCouldEverFit) {
  fleet_.AddHost("h1", 4000, 4000);
  fleet_.running.push_back({1, "h1", 1000, 1000, 10, true, "batch"});
  fleet_.AddJob(9, 1000, 1000);
  fleet_.s.pending[9].request.priority = 90;
  fleet_.AddJob(10, 99999, 1000);  // bigger than every host
  fleet_.s.pending[10].request.priority = 90;
  Run();
  EXPECT_EQ(1u, Dispatched());
  EXPECT_EQ(0, fleet_.preemption_reads);
  EXPECT_TRUE(fleet_.preempts.empty());
}

TEST_F(PreemptionPassTest, AFruitlessLookIsNotRepeatedEveryPassUnlessAHigherPriorityJobCame) {
  FullFleet(90);
  for (auto& j : fleet_.running) j.preemptible = false;
  FormationPass pass(100, metrics_);  // one pass object: the scheduler's, across passes
  auto work = [&] {
    pass.Work(fleet_, 7, &targets_, &pass_hosts_);
    fleet_.Rollback();
    pass_hosts_.reset();
  };
  work();
  const int reads = fleet_.preemption_reads;
  EXPECT_GT(reads, 0);
  work();
  EXPECT_EQ(reads, fleet_.preemption_reads) << "looked again within Preemptor::kLookAgainAfter";
  fleet_.AddJob(8, 2000, 2000);
  fleet_.s.pending[8].request.priority = 95;
  work();
  EXPECT_GT(fleet_.preemption_reads, reads) << "a job of higher priority looks at once";
}

}  // namespace
}  // namespace pgfleet::schedulerd::testing_pass
