#pragma once
// FakeFleet: a PassStore (schedulerd/pass_store.h) over one formation's jobs
// and the hosts, in memory, for tests of a formation's pass without a
// database. It keeps the rules PostgreSQL enforces for the pass (below) and
// records what the pass did: snapshots, host locks, commits, reason writes.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/model/constants.h"
#include "schedulerd/pass_store.h"

namespace pgfleet::schedulerd::testing_pass {

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
    std::vector<placement::SysbatchJobView> sysbatch_jobs;  // every state
    std::map<int64_t, std::string> assigned;                // job id -> host id
    std::vector<std::pair<std::vector<int64_t>, std::string>> stops;
    int64_t next_id = 1000;
    std::optional<store::ActiveRollout> rollout;  // in progress
    std::vector<std::string> rollout_writes;      // "progress <state>", "finish", "fail <why>"
    int live_before = 0;  // the formation's jobs assigned or running before the test's
    std::map<std::string, placement::OwnerQuota> quotas;  // owner -> quota, usage
  };

  State s;
  store::FormationShape shape{false, 0, "batch"};
  bool exists = true, lock_busy = false;
  std::set<int64_t> jobs_held_elsewhere;
  // What the pass did.
  int snapshots = 0, host_locks = 0, commits = 0, host_count_reads = 0, limit_reads = 0;
  int cron_ticks = 0, cron_jobs_per_tick = 1;
  std::vector<std::string> system_hosts;  // what SystemHosts answers
  int version = 0;                        // the formation's: replicas are created of it
  std::vector<std::map<int64_t, std::string>> reason_writes;
  bool fail_reasons = false;
  bool fail_assign = false;  // AssignJobs throws (a statement that failed mid-pass)
  // Preemption: the jobs running on the hosts (all preemptible ones), the
  // formations' budgets, the jobs still waiting for earlier victims, whether
  // pgfleet.preempt refuses, and what the pass asked of them.
  std::vector<placement::RunningJob> running;
  std::map<std::string, int> may_lose;
  std::set<int64_t> waiting_for_victims;
  bool refuse_preempt = false;
  int preemption_reads = 0;
  std::vector<std::pair<int64_t, std::pair<std::string, std::vector<int64_t>>>> preempts;

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
  std::vector<std::string> SystemHosts(int) override {
    InTx();
    return system_hosts;
  }
  int CreateSystemReplicas(int, const std::vector<std::string>& hosts) override {
    InTx();
    for (const auto& h : hosts) {
      int64_t id = s.next_id++;
      AddJob(id, 100, 64);
      s.pending[id].request.pinned_host = h;
      s.replicas.push_back({id, model::ReplicaState::kPending, false, "", "", h, version});
    }
    return static_cast<int>(hosts.size());
  }
  std::vector<placement::SysbatchJobView> SysbatchJobs(int) override {
    InTx();
    return s.sysbatch_jobs;
  }
  // As schedulerd_create_sysbatch_jobs: none once the formation is done.
  int CreateSysbatchJobs(int, const std::vector<std::string>& hosts) override {
    InTx();
    if (shape.done) return 0;
    for (const auto& h : hosts) {
      int64_t id = s.next_id++;
      AddJob(id, 100, 64);
      s.pending[id].request.pinned_host = h;
      s.sysbatch_jobs.push_back({id, h, true, s.hosts.count(h) > 0});
    }
    return static_cast<int>(hosts.size());
  }
  // As schedulerd_cron_tick: cron_jobs_per_tick new pending jobs (which
  // due times, overlap and catch_up are pgfleet.cron_tick's, tested in SQL).
  int CronTick(int) override {
    InTx();
    ++cron_ticks;
    for (int i = 0; i < cron_jobs_per_tick; ++i) AddJob(s.next_id++, 100, 64);
    return cron_jobs_per_tick;
  }
  placement::HostCounts FormationHostCounts(const std::string&) override {
    InTx();
    ++host_count_reads;
    placement::HostCounts out;
    for (const auto& [job, host] : s.assigned) ++out[host];
    return out;
  }
  std::optional<store::ActiveRollout> ActiveRollout(int) override {
    InTx();
    return s.rollout;
  }
  void RecordRolloutProgress(int64_t, const std::string& state, int, int healthy,
                             const std::string&) override {
    InTx();
    s.rollout_writes.push_back("progress " + state);
    if (s.rollout) s.rollout->state = state, s.rollout->healthy = healthy;
  }
  void FinishRollout(int64_t, int, int) override {
    InTx();
    s.rollout_writes.push_back("finish");
    s.rollout.reset();
  }
  std::optional<int> FailRollout(int64_t, const std::string& why) override {
    InTx();
    s.rollout_writes.push_back("fail " + why);
    s.rollout.reset();
    return std::nullopt;
  }
  int CreateReplicas(int, int count) override {
    InTx();
    for (int i = 0; i < count; ++i) {
      int64_t id = s.next_id++;
      AddJob(id, 100, 64);
      s.replicas.push_back({id, model::ReplicaState::kPending, false, "", "", "", version});
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
  int FormationLive(const std::string&) override {
    InTx();
    ++limit_reads;
    return s.live_before + static_cast<int>(s.assigned.size());
  }
  std::map<std::string, placement::OwnerQuota> OwnerQuotas(
      const std::vector<std::string>& owners) override {
    InTx();
    ++limit_reads;
    std::map<std::string, placement::OwnerQuota> out;
    for (const auto& o : owners) {
      if (auto it = s.quotas.find(o); it != s.quotas.end()) out.emplace(o, it->second);
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
  std::vector<store::Assignment> AssignJobs(
      const std::vector<placement::Placement>& plan) override {
    InTx();
    if (fail_assign) throw std::runtime_error("could not assign: statement failed");
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
      // The ports as asked and free (pgfleet.ports_fit_host).
      bool ports_ok = p.ports.size() == r.ports.size();
      for (const auto& [name, port] : p.ports) {
        ports_ok = ports_ok && r.ports.count(name) && !v.ports_held.count(port) &&
                   (r.ports.at(name) == 0 || r.ports.at(name) == port);
      }
      if (!ports_ok) continue;
      for (const auto& [name, port] : p.ports) v.ports_held.insert(port);
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

  store::PreemptionInputs ReadPreemptionInputs(int priority) override {
    InTx();
    ++preemption_reads;
    store::PreemptionInputs in;
    for (const auto& r : running) {
      if (r.preemptible && r.priority < priority) in.running.push_back(r);
    }
    in.may_lose = may_lose;
    return in;
  }
  std::set<int64_t> WaitingForVictims(const std::vector<int64_t>& jobs) override {
    InTx();
    ++preemption_reads;
    std::set<int64_t> out;
    for (int64_t j : jobs) {
      if (waiting_for_victims.count(j)) out.insert(j);
    }
    return out;
  }
  int Preempt(int64_t job, const std::string& host, const std::vector<int64_t>& victims) override {
    InTx();
    preempts.push_back({job, {host, victims}});
    if (refuse_preempt) return 0;
    waiting_for_victims.insert(job);
    return static_cast<int>(victims.size());
  }

 private:
  void InTx() const { EXPECT_TRUE(in_tx_) << "store used outside the pass's transaction"; }
  State saved_;
  bool in_tx_ = false;
  bool snapshotted_ = false;
};

}  // namespace pgfleet::schedulerd::testing_pass
