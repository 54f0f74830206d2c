// A formation's pass (schedulerd/formation_pass.h) on an in-memory fleet
// (FakeFleet, a PassStore): the lock, the service's replicas, the rounds
// that plan on hosts the pass holds, replans after a refused assignment,
// which reasons are written, and what reaches the dispatcher. No database:
// the same pass on PostgreSQL is what the integration and e2e suites run.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/model/constants.h"
#include "schedulerd/formation_pass.h"

namespace pgfleet::schedulerd {
namespace {

// One formation's data and the hosts, with the rules PostgreSQL enforces
// for the pass: rolled back unless committed; LockHosts skips hosts held
// elsewhere; AssignJobs skips jobs held elsewhere and hosts without room.
class FakeFleet : public PassStore {
 public:
  struct Host {
    placement::HostView view;
    bool held_elsewhere = false;  // another transaction holds its row
    // Room another transaction takes once this pass first snapshots the
    // host: LockHosts and AssignJobs see it, the snapshot did not.
    int taken_after_snapshot_cpu = 0;
  };
  struct State {
    std::map<int64_t, store::PendingJob> pending;  // job id -> job (by id = priority order here)
    std::map<std::string, Host> hosts;
    std::vector<placement::ReplicaView> replicas;
    std::map<int64_t, std::string> assigned;  // job id -> host id
    std::vector<std::pair<std::vector<int64_t>, std::string>> stops;
    int64_t next_id = 1000;
  };

  State s;
  store::FormationShape shape{false, 0, "batch"};
  bool exists = true, lock_busy = false;
  std::set<int64_t> jobs_held_elsewhere;
  // What the pass did.
  int snapshots = 0, host_locks = 0, commits = 0;
  std::vector<std::map<int64_t, std::string>> reason_writes;
  bool fail_reasons = false;

  void AddHost(const std::string& id, int cpu, int memory, int cpu_allocated = 0) {
    Host h;
    h.view.id = id;
    h.view.cpu_total = cpu;
    h.view.memory_total = memory;
    h.view.cpu_allocated = cpu_allocated;
    s.hosts[id] = h;
  }
  void AddJob(int64_t id, int cpu, int memory, std::string reason = "") {
    store::PendingJob p;
    p.request.id = id;
    p.request.cpu = cpu;
    p.request.memory = memory;
    p.reason = std::move(reason);
    s.pending[id] = p;
  }

  void Begin() override {
    EXPECT_FALSE(in_tx_) << "Begin inside a transaction";
    saved_ = s;
    in_tx_ = true;
    snapshotted_ = false;
  }
  void Commit() override {
    EXPECT_TRUE(in_tx_);
    in_tx_ = false;
    ++commits;
  }
  void Rollback() {  // what PostgreSQL does to a transaction that never committed
    if (in_tx_) s = saved_;
    in_tx_ = false;
  }

  store::FormationLock LockFormation(int) override {
    InTx();
    store::FormationLock l;
    l.exists = exists;
    if (exists && !lock_busy) l.shape = shape;
    return l;
  }
  std::vector<placement::ReplicaView> LiveReplicas(const std::string&) override {
    InTx();
    return s.replicas;
  }
  int CreateReplicas(int, int count) override {
    InTx();
    for (int i = 0; i < count; ++i) {
      int64_t id = s.next_id++;
      AddJob(id, 100, 64);
      s.replicas.push_back({id, model::ReplicaState::kPending, false});
    }
    return count;
  }
  void StopJobs(const std::vector<int64_t>& ids, const std::string& reason) override {
    InTx();
    s.stops.push_back({ids, reason});
  }
  std::vector<store::PendingJob> ReadPending(const std::string&, int limit) override {
    InTx();
    std::vector<store::PendingJob> out;
    for (const auto& [id, p] : s.pending) {
      if (static_cast<int>(out.size()) == limit) break;
      out.push_back(p);
    }
    return out;
  }
  std::vector<store::SnapshotHost> LoadHostSnapshot(store::HostConfigs*) override {
    InTx();
    ++snapshots;
    std::vector<store::SnapshotHost> out;
    for (auto& [id, h] : s.hosts) {
      store::SnapshotHost sh;
      sh.view = h.view;
      sh.api_url = "http://" + id;
      out.push_back(sh);
    }
    if (!snapshotted_) {
      snapshotted_ = true;
      for (auto& [id, h] : s.hosts) h.view.cpu_allocated += h.taken_after_snapshot_cpu;
    }
    return out;
  }
  std::map<std::string, store::LockedHost> LockHosts(const std::vector<std::string>& ids) override {
    InTx();
    ++host_locks;
    std::map<std::string, store::LockedHost> out;
    for (const auto& id : ids) {
      auto it = s.hosts.find(id);
      if (it == s.hosts.end() || it->second.held_elsewhere) continue;
      const auto& v = it->second.view;
      out[id] = {v.cpu_total, v.memory_total, v.cpu_allocated, v.memory_allocated};
    }
    return out;
  }
  std::vector<store::Assignment> AssignJobs(const std::vector<placement::Placement>& plan) override {
    InTx();
    std::vector<store::Assignment> out;
    for (const auto& p : plan) {
      auto job = s.pending.find(p.job_id);
      auto& host = s.hosts.at(p.host_id);
      if (job == s.pending.end() || jobs_held_elsewhere.count(p.job_id)) continue;
      const auto& r = job->second.request;
      auto& v = host.view;
      if (v.cpu_allocated + r.cpu > v.cpu_total || v.memory_allocated + r.memory > v.memory_total) {
        continue;  // the host filled up: assign_jobs charges conditionally
      }
      v.cpu_allocated += r.cpu;
      v.memory_allocated += r.memory;
      s.assigned[p.job_id] = p.host_id;
      out.push_back({p.job_id, 1, p.host_id, "{}", "uid-" + std::to_string(p.job_id)});
      s.pending.erase(job);
    }
    return out;
  }
  void SetPendingReasons(const std::map<int64_t, std::string>& reasons) override {
    EXPECT_FALSE(in_tx_) << "reasons must be written after the pass commits";
    if (fail_reasons) throw std::runtime_error("statement timeout");
    reason_writes.push_back(reasons);
    for (const auto& [id, why] : reasons) {
      auto it = s.pending.find(id);
      if (it != s.pending.end()) it->second.reason = why;
    }
  }

 private:
  void InTx() const { EXPECT_TRUE(in_tx_) << "store used outside the pass's transaction"; }
  State saved_;
  bool in_tx_ = false;
  bool snapshotted_ = false;
};

class FormationPassTest : public ::testing::Test {
 protected:
  FormationPassResult Run(int batch = 100) {
    FormationPass pass(batch, metrics_);
    try {
      auto r = pass.Work(fleet_, 7, &targets_, &pass_hosts_);
      fleet_.Rollback();  // no-op after a commit
      return r;
    } catch (...) {
      fleet_.Rollback();
      throw;
    }
  }
  size_t Dispatched() const {
    size_t n = 0;
    for (const auto& [host, t] : targets_) n += t.jobs.size();
    return n;
  }

  metrics::Registry metrics_;
  FakeFleet fleet_;
  Targets targets_;
  std::optional<std::vector<store::SnapshotHost>> pass_hosts_;
};

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

TEST_F(FormationPassTest, JobsStillPlannedOnHostsHeldElsewhereWaitWithACapacityReason) {
  fleet_.AddHost("a", 10000, 100000);
  fleet_.s.hosts["a"].held_elsewhere = true;
  const int n = model::kPlanWithoutLocksUpTo + 1;
  for (int i = 1; i <= n; ++i) fleet_.AddJob(i, 100, 64);
  auto r = Run();
  EXPECT_TRUE(r.locked);
  EXPECT_FALSE(r.assigned);
  EXPECT_TRUE(fleet_.s.assigned.empty());
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  EXPECT_EQ(static_cast<size_t>(n), fleet_.reason_writes[0].size());
  EXPECT_EQ("waiting for capacity: needs 100m cpu, 64 MiB memory", fleet_.reason_writes[0].at(1));
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

TEST_F(FormationPassTest, OnlyReasonsThatChangedAreWrittenAndNotForTheQueueBehindItsHead) {
  fleet_.AddHost("h1", 50, 1000);  // room for none of them now, for all of them empty
  const int n = model::kReasonHead + 10;
  for (int i = 1; i <= n; ++i) fleet_.AddJob(i, 100, 64);
  fleet_.s.hosts["h1"].view.cpu_total = 1000;
  fleet_.s.hosts["h1"].view.cpu_allocated = 1000;  // full now
  const std::string capacity = "waiting for capacity: needs 100m cpu, 64 MiB memory";
  fleet_.s.pending[1].reason = capacity;                    // unchanged: not written
  fleet_.s.pending[n].reason = "no host matches constraints";  // behind the head, but said before
  Run();
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  const auto& w = fleet_.reason_writes[0];
  EXPECT_EQ(0u, w.count(1)) << "its reason did not change";
  EXPECT_EQ(1u, w.count(2));
  EXPECT_EQ(1u, w.count(model::kReasonHead));
  EXPECT_EQ(0u, w.count(model::kReasonHead + 1)) << "behind the head, only waits its turn";
  EXPECT_EQ(1u, w.count(n)) << "its old reason is wrong now";
  EXPECT_EQ(capacity, w.at(n));
}

TEST_F(FormationPassTest, AJobThatCanNeverFitIsToldSoWhereverItIsInTheQueue) {
  fleet_.AddHost("h1", 1000, 1000);
  const int n = model::kReasonHead + 5;
  for (int i = 1; i < n; ++i) fleet_.AddJob(i, 1000, 64);  // the host has room for one
  fleet_.AddJob(n, 1000, 999999);                          // never fits
  Run();
  ASSERT_EQ(1u, fleet_.reason_writes.size());
  ASSERT_EQ(1u, fleet_.reason_writes[0].count(n));
  EXPECT_NE(std::string::npos, fleet_.reason_writes[0].at(n).find("no host has 999999 MiB memory"))
      << fleet_.reason_writes[0].at(n);
}

TEST_F(FormationPassTest, AFailedReasonWriteKeepsTheCommittedAssignments) {
  fleet_.AddHost("h1", 100, 1000);
  fleet_.AddJob(1, 100, 64);
  fleet_.AddJob(2, 100, 64);  // no room left: would get a reason
  fleet_.fail_reasons = true;
  auto r = Run();
  EXPECT_TRUE(r.assigned);
  EXPECT_EQ(1u, Dispatched());
  EXPECT_EQ(1, metrics_.Get("pgfleet_scheduler_errors_total"));
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

TEST_F(FormationPassTest, AServiceGetsItsMissingReplicasPlacedInTheSamePass) {
  fleet_.shape = {true, 3, "web"};
  fleet_.AddHost("h1", 10000, 10000);
  auto r = Run();
  EXPECT_TRUE(r.assigned);
  EXPECT_EQ(3u, fleet_.s.assigned.size());
  EXPECT_TRUE(fleet_.s.stops.empty());
}

TEST_F(FormationPassTest, AServiceScaledDownStopsItsSurplusSayingWhy) {
  fleet_.shape = {true, 1, "web"};
  fleet_.s.replicas = {{1, model::ReplicaState::kRunning, false},
                       {2, model::ReplicaState::kRunning, false}};
  Run();
  ASSERT_EQ(1u, fleet_.s.stops.size());
  EXPECT_EQ(std::vector<int64_t>{2}, fleet_.s.stops[0].first);
  EXPECT_EQ("service web scaled to 1 replicas", fleet_.s.stops[0].second);
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

}  // namespace
}  // namespace pgfleet::schedulerd
