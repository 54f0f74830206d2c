#include "schedulerd/formation_pass.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "core/model/constants.h"
#include "core/placement/limits.h"
#include "core/placement/placement.h"
#include "schedulerd/rollout.h"
#include "schedulerd/service.h"

namespace pgfleet::schedulerd {

placement::Plan FormationPass::PlanOnHeldHosts(
    PassStore& store, const std::vector<placement::JobRequest>& todo,
    const std::map<int64_t, const placement::JobRequest*>& requests,
    std::vector<placement::HostView> hosts, const placement::HostCounts& spread,
    std::set<std::string>* held) {
  for (int round = 0;; ++round) {
    placement::Plan plan = placement::PlanPlacements(todo, hosts, spread);
    std::set<std::string> want;
    for (const auto& p : plan.placements) {
      if (!held->count(p.host_id)) want.insert(p.host_id);
    }
    if (want.empty()) return plan;
    if (round == model::kHoldRounds) {
      // Still planned onto hosts held elsewhere: those jobs wait for the
      // next pass, with the words of a job that found no room.
      std::vector<placement::Placement> kept;
      for (auto& p : plan.placements) {
        if (held->count(p.host_id)) {
          kept.push_back(std::move(p));
          continue;
        }
        plan.unplaced.push_back(
            {p.job_id, placement::CapacityReason(*requests.at(p.job_id)), false});
      }
      plan.placements = std::move(kept);
      return plan;
    }
    const auto got = store.LockHosts(std::vector<std::string>(want.begin(), want.end()));
    // What the plan puts on each host it newly locked.
    std::map<std::string, std::pair<int64_t, int64_t>> load;
    for (const auto& p : plan.placements) {
      if (!want.count(p.host_id)) continue;
      load[p.host_id].first += requests.at(p.job_id)->cpu;
      load[p.host_id].second += requests.at(p.job_id)->memory;
    }
    bool stands = true;  // every host locked, with room for what the plan puts there
    for (auto& h : hosts) {
      if (!want.count(h.id)) continue;
      auto it = got.find(h.id);
      if (it == got.end()) {
        // Held elsewhere (or no longer up): full for this pass's plans.
        h.cpu_allocated = std::max(h.cpu_allocated, h.cpu_total);
        h.memory_allocated = std::max(h.memory_allocated, h.memory_total);
        stands = false;
        metrics_.Add("pgfleet_scheduler_hosts_held_elsewhere_total", 1);
        continue;
      }
      held->insert(h.id);
      const store::LockedHost& now = it->second;
      h.cpu_total = now.cpu;
      h.memory_total = now.memory;
      h.cpu_allocated = now.cpu_allocated;
      h.memory_allocated = now.memory_allocated;
      // Room freed since the snapshot leaves the plan standing; room taken
      // since does not.
      const auto& [cpu, memory] = load[h.id];
      if (int64_t{now.cpu_allocated} + cpu > now.cpu ||
          int64_t{now.memory_allocated} + memory > now.memory) {
        stands = false;
      }
    }
    if (stands) return plan;
  }
}

FormationPass::Placed FormationPass::Place(
    PassStore& store, const std::vector<store::PendingJob>& claimed,
    std::optional<std::vector<store::SnapshotHost>>* pass_hosts, placement::HostCounts spread) {
  Placed out;
  std::vector<placement::JobRequest> todo;
  for (const auto& p : claimed) todo.push_back(p.request);
  // Host id -> its API URL and ticket key (no jobs), from the snapshots.
  std::map<std::string, HostTarget> reach;
  std::map<int64_t, const placement::JobRequest*> requests;
  for (const auto& p : claimed) requests[p.request.id] = &p.request;
  // What this pass assigned to each host, charged to the pass's snapshot at
  // the end (the next formation's first round plans against it).
  std::map<std::string, std::pair<int, int>> charged;     // host -> cpu, memory
  std::map<std::string, std::vector<int>> charged_ports;  // host -> ports given
  std::set<std::string> held;                             // hosts this transaction holds
  for (int round = 0; round < model::kReplanRounds && !todo.empty(); ++round) {
    // The first round plans against the pass's snapshot; a replan (a host
    // filled up meanwhile) against fresh state.
    if (round == 0 && !pass_hosts->has_value()) {
      *pass_hosts = store.LoadHostSnapshot(&host_configs_);
    }
    std::vector<store::SnapshotHost> snapshot =
        round == 0 ? **pass_hosts : store.LoadHostSnapshot(&host_configs_);
    std::vector<placement::HostView> hosts;
    for (auto& h : snapshot) {
      reach[h.view.id] = HostTarget{h.api_url, h.ticket_key, h.suspensions, {}};
      hosts.push_back(std::move(h.view));
    }
    // A few jobs (a lone insert's) go straight to assign_jobs, which still
    // refuses a host that filled up: one round trip less on their way to
    // running. Many, or any left out by a first try, lock their hosts first.
    auto plan = round == 0 && todo.size() <= static_cast<size_t>(model::kPlanWithoutLocksUpTo)
                    ? placement::PlanPlacements(todo, std::move(hosts), spread)
                    : PlanOnHeldHosts(store, todo, requests, std::move(hosts), spread, &held);
    for (const auto& u : plan.unplaced) out.reasons[u.job_id] = {u.reason, u.never_fits};
    if (plan.placements.empty()) break;
    std::set<int64_t> done;
    std::map<int64_t, const std::map<std::string, int>*> given;  // job -> its planned ports
    for (const auto& pl : plan.placements) {
      if (!pl.ports.empty()) given[pl.job_id] = &pl.ports;
    }
    for (auto& a : store.AssignJobs(plan.placements)) {
      done.insert(a.job_id);
      if (a.since_insert >= 0) out.since_insert.push_back(a.since_insert);
      ++spread[a.host_id];
      charged[a.host_id].first += requests[a.job_id]->cpu;
      charged[a.host_id].second += requests[a.job_id]->memory;
      if (auto g = given.find(a.job_id); g != given.end()) {
        for (const auto& [name, port] : *g->second) charged_ports[a.host_id].push_back(port);
      }
      // The host's target as the snapshot has it (no jobs yet), then this job.
      auto& target = out.planned.try_emplace(a.host_id, reach[a.host_id]).first->second;
      target.jobs.push_back(Dispatch{a.job_id, a.attempt, std::move(a.spec), std::move(a.uid),
                                     requests[a.job_id]->privileged});
      out.reasons.erase(a.job_id);
    }
    out.assigned += done.size();
    std::vector<placement::JobRequest> retry;
    for (const auto& pl : plan.placements) {
      if (done.count(pl.job_id)) continue;
      for (const auto& j : todo) {
        if (j.id == pl.job_id) retry.push_back(j);
      }
      // The same words as a job the plan found no room for: a job that
      // alternates between the two (a host filled up, then none had room)
      // must not have its row written each time.
      out.reasons[pl.job_id] = {placement::CapacityReason(*requests[pl.job_id]), false};
      metrics_.Add("pgfleet_scheduler_replans_total", 1);
    }
    todo = std::move(retry);
  }
  if (pass_hosts->has_value() && !charged.empty()) {
    for (auto& h : **pass_hosts) {
      auto it = charged.find(h.view.id);
      if (it == charged.end()) continue;
      h.view.cpu_allocated += it->second.first;
      h.view.memory_allocated += it->second.second;
      for (int port : charged_ports[h.view.id]) h.view.ports_held.insert(port);
    }
  }
  return out;
}

void FormationPass::HoldBack(PassStore& store, const store::FormationShape& shape,
                             const std::vector<store::PendingJob>& claimed,
                             std::vector<store::PendingJob>* within,
                             std::map<int64_t, Waiting>* held_back) {
  placement::Limits limits;
  limits.formation = shape.name;
  limits.max_running = shape.max_running;
  if (shape.max_running > 0) limits.live = store.FormationLive(shape.name);
  std::vector<placement::LimitedJob> jobs;
  std::set<std::string> owners;
  for (const auto& p : claimed) {
    jobs.push_back({p.request.id, p.owner, p.request.cpu, p.request.memory});
    owners.insert(p.owner);
  }
  if (shape.quotas) limits.owners = store.OwnerQuotas({owners.begin(), owners.end()});
  auto split = placement::ApplyLimits(jobs, limits);
  const std::set<int64_t> kept(split.kept.begin(), split.kept.end());
  for (const auto& p : claimed) {
    if (kept.count(p.request.id)) within->push_back(p);
  }
  for (auto& [id, why] : split.waiting) (*held_back)[id] = {std::move(why), false};
}

void FormationPass::Preempt(PassStore& store, int formation_id,
                            const std::vector<store::PendingJob>& claimed,
                            const std::optional<std::vector<store::SnapshotHost>>& pass_hosts,
                            std::map<int64_t, Waiting>* reasons) {
  std::vector<std::pair<placement::JobRequest, std::string>> waiting;  // priority order
  for (const auto& p : claimed) {
    auto it = reasons->find(p.request.id);
    if (it != reasons->end() && !it->second.never_fits) waiting.emplace_back(p.request, p.reason);
  }
  if (waiting.empty() || !pass_hosts) return;
  std::vector<placement::HostView> hosts;
  for (const auto& h : *pass_hosts) hosts.push_back(h.view);
  for (auto& [id, reason] :
       preemptor_.Run(store, formation_id, waiting, std::move(hosts), Preemptor::Clock::now())) {
    (*reasons)[id] = {std::move(reason), false};
  }
}

void FormationPass::WriteReasons(PassStore& store, const std::vector<store::PendingJob>& claimed,
                                 const std::map<int64_t, Waiting>& reasons) {
  std::map<int64_t, std::string> changed;
  for (size_t i = 0; i < claimed.size(); ++i) {
    const auto& p = claimed[i];
    auto it = reasons.find(p.request.id);
    if (it == reasons.end() || it->second.reason == p.reason) continue;
    // Behind the head of the queue, a job that only waits its turn (for
    // capacity, or for hosts to recover) and has no reason yet is left
    // without one (docs/decisions/0015). A job that can never fit, or whose
    // reason says something else now, is written wherever it is.
    if (i >= static_cast<size_t>(model::kReasonHead) && !it->second.never_fits &&
        p.reason.empty()) {
      continue;
    }
    changed.emplace(p.request.id, it->second.reason);
  }
  if (changed.empty()) return;
  try {
    store.SetPendingReasons(changed);
  } catch (const pqxx::broken_connection&) {
    throw;
  } catch (const std::exception& e) {  // advisory: the pass's assignments stand
    metrics_.Add("pgfleet_scheduler_errors_total", 1);
    spdlog::warn("writing why {} jobs wait failed: {}", changed.size(), e.what());
  }
}

FormationPassResult FormationPass::Work(
    PassStore& store, int formation_id, Targets* out,
    std::optional<std::vector<store::SnapshotHost>>* pass_hosts) {
  store.Begin();
  auto lock = store.LockFormation(formation_id);
  if (!lock.shape) {
    if (lock.exists) metrics_.Add("pgfleet_scheduler_formation_lock_busy_total", 1);
    return {};
  }
  const auto& shape = lock.shape;
  const store::Formation formation{formation_id, shape->name};
  if (shape->is_service &&
      !(shape->rolling_out && RollOutService(store, formation, shape->replicas, metrics_))) {
    ReconcileReplicas(store, formation, shape->replicas, metrics_);
  }
  if (shape->is_system) {
    if (shape->rolling_out) RollOutSystem(store, formation, metrics_);
    ReconcileSystemReplicas(store, formation, metrics_);
  }
  if (shape->is_sysbatch) ReconcileSysbatchJobs(store, formation, shape->done, metrics_);
  if (shape->cron_due) {
    int created = store.CronTick(formation.id);
    metrics_.Add("pgfleet_scheduler_cron_jobs_created_total", created);
    spdlog::info("formation={} id={} cron tick created={}", formation.name, formation.id, created);
  }
  auto claimed = store.ReadPending(formation.name, batch_size_);
  if (claimed.empty()) {
    store.Commit();
    return {true, false};
  }
  placement::HostCounts spread;
  if (!shape->spread.empty()) {
    for (auto& p : claimed) p.request.spread = shape->spread;
    spread = store.FormationHostCounts(formation.name);
  }
  // Without limits (the common case) every claimed job is planned, with no
  // statement more.
  std::vector<store::PendingJob> within;
  std::map<int64_t, Waiting> held_back;
  const bool limited = shape->max_running > 0 || shape->quotas;
  if (limited) HoldBack(store, *shape, claimed, &within, &held_back);
  const auto& placeable = limited ? within : claimed;
  Placed placed;
  if (!placeable.empty()) placed = Place(store, placeable, pass_hosts, std::move(spread));
  for (auto& [id, why] : held_back) placed.reasons.emplace(id, std::move(why));
  Preempt(store, formation_id, placeable, *pass_hosts, &placed.reasons);
  store.Commit();
  // Only committed assignments are ever dispatched.
  for (auto& [host, target] : placed.planned) {
    auto [it, fresh] = out->try_emplace(host, std::move(target));  // moves only when fresh
    if (!fresh) {
      for (auto& d : target.jobs) it->second.jobs.push_back(std::move(d));
    }
  }
  WriteReasons(store, claimed, placed.reasons);
  metrics_.Add("pgfleet_scheduler_jobs_assigned_total", static_cast<double>(placed.assigned));
  for (double s : placed.since_insert) {
    metrics_.Observe("pgfleet_scheduler_insert_to_assigned_seconds", s);
  }
  if (placed.assigned > 0 || !placed.reasons.empty()) {
    spdlog::info("formation={} id={} claimed={} assigned={} waiting={}", formation.name,
                 formation.id, claimed.size(), placed.assigned, placed.reasons.size());
  }
  // A full batch means more may be waiting: come back to this formation at once.
  // (Not when a limit held jobs back: they wait for one of the formation's
  // or the owner's jobs to end, which wakes the schedulers.)
  bool full = static_cast<int>(claimed.size()) == batch_size_ && held_back.empty();
  return {true, full && placed.assigned > 0, placed.assigned > 0};
}

}  // namespace pgfleet::schedulerd
