#include "schedulerd/pass_store.h"

#include <stdexcept>

namespace pgfleet::schedulerd {

pqxx::work& PgPassStore::Tx() {
  if (!tx_) throw std::logic_error("formation pass: store used outside its transaction");
  return *tx_;
}

void PgPassStore::Begin() {
  tx_.reset();  // rolls back one that did not commit
  tx_.emplace(conn_);
}

void PgPassStore::Commit() {
  Tx().commit();
  tx_.reset();
}

store::FormationLock PgPassStore::LockFormation(int formation_id) {
  return store::LockFormation(Tx(), formation_id);
}

std::vector<placement::ReplicaView> PgPassStore::LiveReplicas(const std::string& formation) {
  return store::LiveReplicas(Tx(), formation);
}

int PgPassStore::CreateReplicas(int formation_id, int count) {
  return store::CreateReplicas(Tx(), formation_id, count);
}

std::optional<store::ActiveRollout> PgPassStore::ActiveRollout(int formation_id) {
  return store::ReadActiveRollout(Tx(), formation_id);
}

void PgPassStore::RecordRolloutProgress(int64_t rollout, const std::string& state, int updated,
                                        int healthy, const std::string& message) {
  store::RecordRolloutProgress(Tx(), rollout, state, updated, healthy, message);
}

void PgPassStore::FinishRollout(int64_t rollout, int updated, int healthy) {
  store::FinishRollout(Tx(), rollout, updated, healthy);
}

std::optional<int> PgPassStore::FailRollout(int64_t rollout, const std::string& why) {
  return store::FailRollout(Tx(), rollout, why);
}

std::vector<std::string> PgPassStore::SystemHosts(int formation_id) {
  return store::SystemHosts(Tx(), formation_id);
}

int PgPassStore::CreateSystemReplicas(int formation_id, const std::vector<std::string>& hosts) {
  return store::CreateSystemReplicas(Tx(), formation_id, hosts);
}

std::vector<placement::SysbatchJobView> PgPassStore::SysbatchJobs(int formation_id) {
  return store::SysbatchJobs(Tx(), formation_id);
}

int PgPassStore::CreateSysbatchJobs(int formation_id, const std::vector<std::string>& hosts) {
  return store::CreateSysbatchJobs(Tx(), formation_id, hosts);
}

int PgPassStore::CronTick(int formation_id) { return store::CronTick(Tx(), formation_id); }

void PgPassStore::StopJobs(const std::vector<int64_t>& job_ids, const std::string& reason) {
  store::StopJobs(Tx(), job_ids, reason);
}

placement::HostCounts PgPassStore::FormationHostCounts(const std::string& formation) {
  return store::FormationHostCounts(Tx(), formation);
}

std::vector<store::PendingJob> PgPassStore::ReadPending(const std::string& formation, int limit) {
  return store::ReadPending(Tx(), formation, limit);
}

std::vector<store::SnapshotHost> PgPassStore::LoadHostSnapshot(store::HostConfigs* configs) {
  return store::LoadHostSnapshot(Tx(), configs);
}

std::map<std::string, store::LockedHost> PgPassStore::LockHosts(
    const std::vector<std::string>& ids) {
  return store::LockHosts(Tx(), ids);
}

std::vector<store::Assignment> PgPassStore::AssignJobs(
    const std::vector<placement::Placement>& plan) {
  return store::AssignJobs(Tx(), plan);
}

void PgPassStore::SetPendingReasons(const std::map<int64_t, std::string>& reasons) {
  if (tx_) throw std::logic_error("formation pass: pending reasons written inside its transaction");
  pqxx::nontransaction tx(conn_);  // one statement; it writes only jobs still pending
  store::SetPendingReasons(tx, reasons);
}

int PgPassStore::FormationLive(const std::string& formation) {
  return store::FormationLive(Tx(), formation);
}

std::map<std::string, placement::OwnerQuota> PgPassStore::OwnerQuotas(
    const std::vector<std::string>& owners) {
  return store::OwnerQuotas(Tx(), owners);
}

store::PreemptionInputs PgPassStore::ReadPreemptionInputs(int priority) {
  return store::ReadPreemptionInputs(Tx(), priority);
}

std::set<int64_t> PgPassStore::WaitingForVictims(const std::vector<int64_t>& jobs) {
  return store::WaitingForVictims(Tx(), jobs);
}

int PgPassStore::Preempt(int64_t job, const std::string& host,
                         const std::vector<int64_t>& victims) {
  return store::Preempt(Tx(), job, host, victims);
}

}  // namespace pgfleet::schedulerd
