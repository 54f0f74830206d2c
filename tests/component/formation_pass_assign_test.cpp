// A formation's pass (schedulerd/formation_pass.h) on an in-memory fleet
// (FakeFleet): the formation lock, the rounds that plan on hosts the pass
// holds, replans after a refused assignment, batches, what reaches the
// dispatcher (only after commit), and the rollback of a failing pass. No
// database: the same pass on PostgreSQL is what the integration and e2e
// suites run. Reasons: formation_pass_reasons_test.cpp.

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model/constants.h"
#include "fake_fleet.h"
#include "formation_pass_fixture.h"

namespace pgfleet::schedulerd::testing_pass {
namespace {

TEST_F(FormationPassTest, AFormationLockedElsewhereIsLeftAlone) {
  fleet_.AddHost("h1", 1000, 1000);
  fleet_.AddJob(1, 100, 64);
  fleet_.lock_busy = true;
  auto r = Run();
  EXPECT_FALSE(r.locked);
  EXPECT_TRUE(fleet_.s.assigned.empty());
  EXPECT_EQ(0, fleet_.snapshots);
  EXPECT_EQ(0u, Dispatched());
  fleet_.lock_busy = false;
  fleet_.exists = false;  // deleted meanwhile: nothing, no error
  EXPECT_FALSE(Run().locked);
}

TEST_F(FormationPassTest, NothingPendingCommitsWithoutASnapshot) {
  fleet_.AddHost("h1", 1000, 1000);
  auto r = Run();
  EXPECT_TRUE(r.locked);
  EXPECT_FALSE(r.assigned);
  EXPECT_EQ(0, fleet_.snapshots);
  EXPECT_EQ(1, fleet_.commits);
}

TEST_F(FormationPassTest, AFewJobsAreAssignedWithoutLockingHostsAndDispatchedOnlyAfterCommit) {
  fleet_.AddHost("h1", 1000, 1000);
  fleet_.AddJob(1, 100, 64);
  fleet_.AddJob(2, 100, 64);
  auto r = Run();
  EXPECT_TRUE(r.assigned);
  EXPECT_FALSE(r.more_waiting);
  EXPECT_EQ(0, fleet_.host_locks) << "up to kPlanWithoutLocksUpTo jobs go straight to assign";
  ASSERT_EQ(1u, targets_.count("h1"));
  EXPECT_EQ("http://h1", targets_.at("h1").api_url);
  EXPECT_EQ(2u, targets_.at("h1").jobs.size());
  EXPECT_EQ("uid-1", targets_.at("h1").jobs[0].uid);
  // The pass's snapshot is charged with what it assigned, for the next formation.
  ASSERT_TRUE(pass_hosts_.has_value());
  EXPECT_EQ(200, (*pass_hosts_)[0].view.cpu_allocated);
}

TEST_F(FormationPassTest, ManyJobsPlanOnlyOnHostsThePassHolds) {
  fleet_.AddHost("a", 10000, 100000);
  fleet_.AddHost("b", 10000, 100000);
  fleet_.s.hosts["a"].held_elsewhere = true;  // another scheduler's pass holds it
  const int n = model::kPlanWithoutLocksUpTo + 4;
  for (int i = 1; i <= n; ++i) fleet_.AddJob(i, 100, 64);
  auto r = Run();
  EXPECT_TRUE(r.assigned);
  EXPECT_GE(fleet_.host_locks, 1);
  EXPECT_EQ(static_cast<size_t>(n), fleet_.s.assigned.size());
  for (const auto& [job, host] : fleet_.s.assigned) EXPECT_EQ("b", host) << "job " << job;
  EXPECT_EQ(0u, targets_.count("a"));
}

TEST_F(FormationPassTest, RoomTakenSinceTheSnapshotIsPlannedAgainOnWhatIsLocked) {
  fleet_.AddHost("a", 1000, 100000);
  fleet_.AddHost("b", 1000, 100000);
  // Between the snapshot and the lock, another pass filled "a" (bin-packing's
  // first choice, the fuller host) with 900m.
  fleet_.s.hosts["a"].view.cpu_allocated = 100;
  fleet_.s.hosts["a"].taken_after_snapshot_cpu = 800;
  const int n = model::kPlanWithoutLocksUpTo + 1;  // 9 x 100m: fits "b" alone, or "a" before
  for (int i = 1; i <= n; ++i) fleet_.AddJob(i, 100, 64);
  Run();
  EXPECT_EQ(static_cast<size_t>(n), fleet_.s.assigned.size());
  for (const auto& [host, h] : fleet_.s.hosts) {
    EXPECT_LE(h.view.cpu_allocated, h.view.cpu_total) << host << " overcommitted";
  }
}

TEST_F(FormationPassTest, AJobAssignJobsLeftOutIsPlannedAgainAndOtherwiseWaits) {
  fleet_.AddHost("h1", 1000, 1000);
  fleet_.AddJob(1, 100, 64);
  fleet_.AddJob(2, 100, 64);
  fleet_.jobs_held_elsewhere = {2};  // a cancel holds its row
  Run();
  EXPECT_EQ(1u, fleet_.s.assigned.count(1));
  EXPECT_EQ(0u, fleet_.s.assigned.count(2));
  EXPECT_EQ(1u, Dispatched());
  // Planned again in each round, then left to the next pass.
  EXPECT_EQ(model::kReplanRounds, metrics_.Get("pgfleet_scheduler_replans_total"));
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  EXPECT_EQ("waiting for capacity: needs 100m cpu, 64 MiB memory", fleet_.reason_writes[0].at(2));
}

TEST_F(FormationPassTest, AFullBatchAssignedSaysMoreMayBeWaiting) {
  fleet_.AddHost("h1", 100000, 100000);
  for (int i = 1; i <= 5; ++i) fleet_.AddJob(i, 100, 64);
  auto r = Run(/*batch=*/3);
  EXPECT_TRUE(r.more_waiting);
  EXPECT_EQ(3u, fleet_.s.assigned.size());
  r = Run(3);
  EXPECT_FALSE(r.more_waiting);
  EXPECT_EQ(5u, fleet_.s.assigned.size());
}

TEST_F(FormationPassTest, ASecondFormationPlansAgainstWhatTheFirstTook) {
  fleet_.AddHost("h1", 1000, 1000);
  fleet_.AddJob(1, 600, 64);
  Run();
  // Same pass, next formation: its plan starts from the charged snapshot, so
  // it does not plan onto room the first formation took (and no new snapshot).
  fleet_.AddJob(2, 600, 64);
  int snapshots = fleet_.snapshots;
  Run();
  EXPECT_EQ(snapshots, fleet_.snapshots);
  EXPECT_EQ(0u, fleet_.s.assigned.count(2));
  EXPECT_EQ(1u, fleet_.s.pending.count(2));
}

TEST_F(FormationPassTest, AFailingStepRollsTheWholePassBack) {
  // The replicas are created, then reading the hosts fails.
  class Throwing : public FakeFleet {
   public:
    std::vector<store::SnapshotHost> LoadHostSnapshot(store::HostConfigs*) override {
      throw std::runtime_error("canceling statement due to statement timeout");
    }
  };
  Throwing fleet;
  fleet.shape = {true, 2, "web"};
  FormationPass pass(100, metrics_);
  EXPECT_THROW(pass.Work(fleet, 7, &targets_, &pass_hosts_), std::runtime_error);
  fleet.Rollback();
  EXPECT_TRUE(fleet.s.pending.empty()) << "the replicas it created are rolled back";
  EXPECT_EQ(0, fleet.commits);
  EXPECT_TRUE(targets_.empty());
}

TEST_F(FormationPassTest, PortsGoWithThePlanAndAreChargedToThePassSnapshot) {
  fleet_.AddHost("h1", 10000, 10000);
  auto& h = fleet_.s.hosts["h1"].view;
  h.port_lo = 20000;
  h.port_hi = 20001;
  for (int64_t id = 1; id <= 3; ++id) {
    fleet_.AddJob(id, 100, 64);
    fleet_.s.pending[id].request.ports = {{"http", 0}};
  }
  auto r = Run();
  EXPECT_TRUE(r.assigned);
  EXPECT_EQ(2u, fleet_.s.assigned.size());
  EXPECT_EQ((std::set<int>{20000, 20001}), fleet_.s.hosts["h1"].view.ports_held);
  // The next formation's first plan sees them held.
  ASSERT_TRUE(pass_hosts_.has_value());
  EXPECT_EQ((std::set<int>{20000, 20001}), (*pass_hosts_)[0].view.ports_held);
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  ASSERT_EQ(1u, fleet_.reason_writes[0].count(3));
  EXPECT_EQ("waiting for ports: ports.http: every port of h1's range 20000-20001 is held",
            fleet_.reason_writes[0].at(3));
}

}  // namespace
}  // namespace pgfleet::schedulerd::testing_pass
