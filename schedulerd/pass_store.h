#pragma once
// What one formation pass (formation_pass.h) reads and writes, and nothing
// else: the pass's seam. PgPassStore runs it on PostgreSQL with the store's
// statements (store.h); the component tests run the same pass on an
// in-memory fleet (FakeFleet, tests/component/fake_fleet.h).
//
// What must hold (the contract every implementation keeps, as store.h says
// for PostgreSQL):
// - Everything between Begin and Commit is one transaction; ending without
//   Commit (an exception, the store destroyed) rolls all of it back.
// - LockFormation holds the formation against every other pass until the
//   transaction ends; LockHosts and AssignJobs never wait for a row another
//   transaction holds: they leave it out.
// - SetPendingReasons runs after Commit, as a statement of its own.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "schedulerd/store.h"
#include "schedulerd/store_preemption.h"

namespace pgfleet::schedulerd {

class PassStore {
 public:
  virtual ~PassStore() = default;

  virtual void Begin() = 0;
  virtual void Commit() = 0;

  // store::LockFormation.
  virtual store::FormationLock LockFormation(int formation_id) = 0;
  // A service's replicas: store::LiveReplicas, CreateReplicas, StopJobs.
  virtual std::vector<placement::ReplicaView> LiveReplicas(const std::string& formation) = 0;
  virtual int CreateReplicas(int formation_id, int count) = 0;
  // A system formation's: store::SystemHosts, CreateSystemReplicas.
  virtual std::vector<std::string> SystemHosts(int formation_id) = 0;
  virtual int CreateSystemReplicas(int formation_id, const std::vector<std::string>& hosts) = 0;
  // A sysbatch formation's: store::SysbatchJobs, CreateSysbatchJobs (and
  // SystemHosts, the same eligibility).
  virtual std::vector<placement::SysbatchJobView> SysbatchJobs(int formation_id) = 0;
  virtual int CreateSysbatchJobs(int formation_id, const std::vector<std::string>& hosts) = 0;
  virtual void StopJobs(const std::vector<int64_t>& job_ids, const std::string& reason) = 0;
  // A cron formation whose due time has come: store::CronTick.
  virtual int CronTick(int formation_id) = 0;
  // store::FormationHostCounts: where a spread formation's jobs are.
  virtual placement::HostCounts FormationHostCounts(const std::string& formation) = 0;
  // A formation's rollout in progress: store::ReadActiveRollout,
  // RecordRolloutProgress, FinishRollout, FailRollout.
  virtual std::optional<store::ActiveRollout> ActiveRollout(int formation_id) = 0;
  virtual void RecordRolloutProgress(int64_t rollout, const std::string& state, int updated,
                                     int healthy, const std::string& message) = 0;
  virtual void FinishRollout(int64_t rollout, int updated, int healthy) = 0;
  virtual std::optional<int> FailRollout(int64_t rollout, const std::string& why) = 0;
  // store::ReadPending, LoadHostSnapshot, LockHosts, AssignJobs.
  virtual std::vector<store::PendingJob> ReadPending(const std::string& formation, int limit) = 0;
  // store::FormationLive, OwnerQuotas: a formation's jobs in flight (its
  // max_running) and owners' quotas with their usage, read under the
  // formation's lock; asked only of a formation with a limit, of owners
  // when some quota exists.
  virtual int FormationLive(const std::string& formation) = 0;
  virtual std::map<std::string, placement::OwnerQuota> OwnerQuotas(
      const std::vector<std::string>& owners) = 0;
  virtual std::vector<store::SnapshotHost> LoadHostSnapshot(store::HostConfigs* configs) = 0;
  virtual std::map<std::string, store::LockedHost> LockHosts(
      const std::vector<std::string>& ids) = 0;
  virtual std::vector<store::Assignment> AssignJobs(
      const std::vector<placement::Placement>& plan) = 0;

  // After Commit: store::SetPendingReasons in a statement of its own.
  virtual void SetPendingReasons(const std::map<int64_t, std::string>& reasons) = 0;

  // Preemption (store_preemption.h): ReadPreemptionInputs, WaitingForVictims,
  // Preempt. A store without them preempts nothing.
  virtual store::PreemptionInputs ReadPreemptionInputs(int /*priority*/) { return {}; }
  virtual std::set<int64_t> WaitingForVictims(const std::vector<int64_t>& /*jobs*/) { return {}; }
  virtual int Preempt(int64_t /*job*/, const std::string& /*host*/,
                      const std::vector<int64_t>& /*victims*/) {
    return 0;
  }
};

// The pass on PostgreSQL, on a connection the store's statements are
// prepared on (store::Prepare). One per pass: its destructor rolls back a
// transaction that did not commit.
class PgPassStore : public PassStore {
 public:
  explicit PgPassStore(pqxx::connection& conn) : conn_(conn) {}

  void Begin() override;
  void Commit() override;
  store::FormationLock LockFormation(int formation_id) override;
  std::vector<placement::ReplicaView> LiveReplicas(const std::string& formation) override;
  int CreateReplicas(int formation_id, int count) override;
  std::vector<std::string> SystemHosts(int formation_id) override;
  int CreateSystemReplicas(int formation_id, const std::vector<std::string>& hosts) override;
  std::vector<placement::SysbatchJobView> SysbatchJobs(int formation_id) override;
  int CreateSysbatchJobs(int formation_id, const std::vector<std::string>& hosts) override;
  void StopJobs(const std::vector<int64_t>& job_ids, const std::string& reason) override;
  int CronTick(int formation_id) override;
  placement::HostCounts FormationHostCounts(const std::string& formation) override;
  std::optional<store::ActiveRollout> ActiveRollout(int formation_id) override;
  void RecordRolloutProgress(int64_t rollout, const std::string& state, int updated, int healthy,
                             const std::string& message) override;
  void FinishRollout(int64_t rollout, int updated, int healthy) override;
  std::optional<int> FailRollout(int64_t rollout, const std::string& why) override;
  std::vector<store::PendingJob> ReadPending(const std::string& formation, int limit) override;
  int FormationLive(const std::string& formation) override;
  std::map<std::string, placement::OwnerQuota> OwnerQuotas(
      const std::vector<std::string>& owners) override;
  std::vector<store::SnapshotHost> LoadHostSnapshot(store::HostConfigs* configs) override;
  std::map<std::string, store::LockedHost> LockHosts(const std::vector<std::string>& ids) override;
  std::vector<store::Assignment> AssignJobs(const std::vector<placement::Placement>& plan) override;
  void SetPendingReasons(const std::map<int64_t, std::string>& reasons) override;
  store::PreemptionInputs ReadPreemptionInputs(int priority) override;
  std::set<int64_t> WaitingForVictims(const std::vector<int64_t>& jobs) override;
  int Preempt(int64_t job, const std::string& host, const std::vector<int64_t>& victims) override;

 private:
  // The open transaction; throws std::logic_error outside Begin..Commit.
  pqxx::work& Tx();

  pqxx::connection& conn_;
  std::optional<pqxx::work> tx_;
};

}  // namespace pgfleet::schedulerd
