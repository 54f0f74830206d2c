#include "schedulerd/store.h"

#include <stdexcept>

#include "core/db/statements.h"
#include "core/model/constants.h"
#include "core/model/states.h"
#include "core/util/text.h"

namespace pgfleet::schedulerd::store {
namespace {

using nlohmann::json;

// $1: all formations; else only those in $2.
constexpr db::Statement kFormationsToWork{
    "schedulerd_formations_to_work",
    "select f.id from pgfleet.formations f"
    "  left join lateral (select greatest("
    "      (select max(j.priority) from pgfleet.jobs j"
    "        where j.formation = f.name and j.state = 'pending' and j.desired_state = 'run'"
    "          and j.not_before is null),"
    "      (select max(j.priority) from pgfleet.jobs j"
    "        where j.state = 'pending' and j.not_before is not null and j.not_before <= now()"
    "          and j.formation = f.name and j.desired_state = 'run')) as p) m on true"
    " where ($1::boolean or f.id = any($2::integer[]))"
    "   and (m.p is not null"
    "    or (f.kind = 'service'"
    "        and (f.replicas <> (select count(*) from pgfleet.jobs j where j.formation = f.name"
    "                              and j.state in ('pending', 'assigned', 'running')"
    "                              and j.desired_state = 'run')"
    "             or exists (select 1 from pgfleet.jobs j join pgfleet.hosts h"
    "                          on h.id = j.host_id"
    "                         where j.formation = f.name and j.state in ('assigned', 'running')"
    "                           and j.desired_state = 'run'"
    "                           and h.state in ('draining', 'offline')))))"
    " order by m.p desc nulls last, f.id"};

// The lock is taken only for the formation's row (none: gone, nothing to do).
// Its shape read in the same statement, before the lock, is what it would
// be after it: schedulers never change a formation's kind or replicas.
constexpr db::Statement kLockFormation{
    "schedulerd_lock_formation",
    "select pgfleet.try_lock_formation(f.id) as locked, f.kind = 'service' as is_service,"
    "       f.replicas, f.name from pgfleet.formations f where f.id = $1"};

// What placement needs, without a lock and without the spec: assign_jobs
// locks the jobs it assigns and returns their specs (docs/decisions/0014).
constexpr db::Statement kReadPending{
    "schedulerd_read_pending",
    // Ready jobs (jobs_ready_idx) and jobs whose not_before has come
    // (jobs_retry_at_idx), each in priority order: never a job waiting for a
    // later not_before, however many there are (migration 0023).
    "select * from ("
    " (select j.id, j.cpu, j.memory, j.priority, j.constraints::text as constraints,"
    "         j.privileged, coalesce(j.error, '') as reason"
    "    from pgfleet.jobs j"
    "   where j.formation = $1 and j.state = 'pending' and j.desired_state = 'run'"
    "     and j.not_before is null"
    "   order by j.priority desc, j.id limit $2)"
    " union all"
    " (select j.id, j.cpu, j.memory, j.priority, j.constraints::text as constraints,"
    "         j.privileged, coalesce(j.error, '') as reason"
    "    from pgfleet.jobs j"
    "   where j.state = 'pending' and j.not_before is not null and j.not_before <= now()"
    "     and j.formation = $1 and j.desired_state = 'run'"
    "   order by j.priority desc, j.id limit $2)) c"
    " order by c.priority desc, c.id limit $2"};

// What changes pass to pass; the rest (HostConfig) is kept by version.
constexpr db::Statement kLoadHostSnapshot{
    "schedulerd_load_host_snapshot",
    "select h.id, h.cpu, h.memory, h.cpu_allocated, h.memory_allocated, h.config_version,"
    "       h.suspensions, coalesce(hb.condition, '') as condition"
    "  from pgfleet.hosts h join pgfleet.host_heartbeats hb on hb.host_id = h.id"
    " where h.state = 'up' and h.admitted"
    "   and (h.suspended_until is null or h.suspended_until <= now())"
    // host_ttl() once (an init plan), not once per host row: 15 ms a call at
    // 1,000 hosts against 1 ms (docs/benchmarks/2026-11-25-fewer-statements-per-job.md)
    "   and hb.last_seen > (select now() - pgfleet.host_ttl())"};

// The hosts of $1 still up and not suspended, locked for the pass (skipping
// those another transaction holds), as locked.
constexpr db::Statement kLockHosts{
    "schedulerd_lock_hosts",
    "select h.id, h.cpu, h.memory, h.cpu_allocated, h.memory_allocated from pgfleet.hosts h"
    " where h.id = any($1::text[]) and h.state = 'up' and h.admitted"
    "   and (h.suspended_until is null or h.suspended_until <= now())"
    " order by h.id"
    "   for update of h skip locked"};

constexpr db::Statement kLoadHostConfigs{
    "schedulerd_load_host_configs",
    "select h.id, h.config_version, h.labels::text as labels, h.api_url,"
    "       pgfleet.driver_isolates(h.driver) as isolates,"
    "       coalesce(encode(k.key, 'hex'), '') as ticket_key"
    "  from pgfleet.hosts h left join pgfleet.host_keys k on k.host_id = h.id"
    " where h.id = any($1::text[])"};

constexpr db::Statement kAssignJobs{
    "schedulerd_assign_jobs",
    "select job_id, attempt, host_id, spec, uid from pgfleet.assign_jobs($1::jsonb)"};

constexpr db::Statement kSetPendingReasons{"schedulerd_set_pending_reasons",
                                           "select pgfleet.set_pending_reasons($1::jsonb)"};

constexpr db::Statement kLiveReplicas{
    "schedulerd_live_replicas",
    "select j.id, j.state,"
    "       coalesce(j.state in ('assigned', 'running') and h.state in ('draining', 'offline'),"
    "                false) as on_leaving_host"
    "  from pgfleet.jobs j left join pgfleet.hosts h on h.id = j.host_id"
    " where j.formation = $1 and j.state in ('pending', 'assigned', 'running')"
    "   and j.desired_state = 'run'"
    " for update of j"};

constexpr db::Statement kCreateReplicas{"schedulerd_create_replicas",
                                        "select pgfleet.create_replicas($1, $2) as created"};

constexpr db::Statement kStopJobs{"schedulerd_stop_jobs",
                                  "select pgfleet.stop_jobs($1::bigint[], $2)"};

constexpr db::Statement kDispatchSucceeded{"schedulerd_dispatch_succeeded",
                                           "select pgfleet.dispatch_succeeded($1::text[])"};

constexpr db::Statement kDispatchFailed{
    "schedulerd_dispatch_failed", "select pgfleet.dispatch_failed($1, $2::jsonb, $3) as requeued"};

constexpr db::Statement kDispatchUnanswered{"schedulerd_dispatch_unanswered",
                                            "select pgfleet.dispatch_unanswered($1)"};

constexpr db::Statement kStopsToForward{
    "schedulerd_stops_to_forward",
    "select j.id, j.attempt, j.host_id, h.api_url, j.stop_force,"
    "       coalesce(encode(k.key, 'hex'), '') as ticket_key from pgfleet.jobs j"
    "  join pgfleet.hosts h on h.id = j.host_id"
    "  left join pgfleet.host_keys k on k.host_id = h.id"
    " where j.desired_state = 'stop' and j.state in ('assigned', 'running')"};

constexpr db::Statement kRecordPassError{
    "schedulerd_record_pass_error",
    "update pgfleet.formations set pass_error = $2, pass_failures = $3, pass_failed_at = now()"
    " where id = $1"};

constexpr db::Statement kClearPassError{
    "schedulerd_clear_pass_error",
    "update pgfleet.formations set pass_error = null, pass_failures = 0"
    " where id = $1 and pass_error is not null"};

std::map<std::string, std::string> JsonToMap(const std::string& text) {
  std::map<std::string, std::string> m;
  auto j = json::parse(text, nullptr, false);
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      if (v.is_string()) m[k] = v.get<std::string>();
    }
  }
  return m;
}

}  // namespace

constexpr db::Statement kSetLockTimeout{"schedulerd_set_lock_timeout",
                                        "select set_config('lock_timeout', $1, false)"};
constexpr db::Statement kTakeIdleLock{"schedulerd_take_idle_lock",
                                      "select pg_advisory_lock($1, $2)"};
constexpr db::Statement kReleaseIdleLock{"schedulerd_release_idle_lock",
                                         "select pg_advisory_unlock($1, $2)"};
constexpr db::Statement kNextRetryIn{"schedulerd_next_retry_in",
                                     "select pgfleet.next_retry_in() as seconds"};

void PrepareListen(pqxx::connection& conn) {
  db::PrepareAll(conn, {&kSetLockTimeout, &kTakeIdleLock, &kReleaseIdleLock, &kNextRetryIn});
}

void SetLockTimeout(pqxx::transaction_base& tx, const std::string& value) {
  db::Exec(tx, kSetLockTimeout, value);
}

void TakeIdleLock(pqxx::transaction_base& tx) {
  db::Exec(tx, kTakeIdleLock, model::kLockClass, model::kIdleLockKey);
}

void ReleaseIdleLock(pqxx::transaction_base& tx) {
  db::Exec(tx, kReleaseIdleLock, model::kLockClass, model::kIdleLockKey);
}

std::optional<double> NextRetryIn(pqxx::transaction_base& tx) {
  auto r = db::Exec1(tx, kNextRetryIn);
  if (r["seconds"].is_null()) return std::nullopt;
  return r["seconds"].as<double>();
}

void PrepareDispatchOutcomes(pqxx::connection& conn) {
  db::PrepareAll(conn, {&kDispatchSucceeded, &kDispatchFailed, &kDispatchUnanswered});
}

void Prepare(pqxx::connection& conn) {
  db::PrepareAll(conn, {&kFormationsToWork, &kLockFormation, &kReadPending, &kLoadHostSnapshot,
                        &kLockHosts, &kLoadHostConfigs, &kAssignJobs, &kSetPendingReasons,
                        &kLiveReplicas, &kCreateReplicas, &kStopJobs, &kStopsToForward,
                        &kRecordPassError, &kClearPassError});
  PrepareMaintenance(conn);
}

std::vector<int> FormationsToWork(pqxx::transaction_base& tx, bool all, const std::set<int>& ids) {
  auto rows = db::Exec(tx, kFormationsToWork, all,
                       db::ArrayParam(std::vector<int>(ids.begin(), ids.end())));
  std::vector<int> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(r["id"].as<int>());
  return out;
}

FormationLock LockFormation(pqxx::transaction_base& tx, int formation_id) {
  auto rows = db::Exec(tx, kLockFormation, formation_id);
  FormationLock out;
  if (rows.empty()) return out;
  out.exists = true;
  if (!rows[0]["locked"].as<bool>()) return out;
  out.shape = FormationShape{rows[0]["is_service"].as<bool>(), rows[0]["replicas"].as<int>(),
                             rows[0]["name"].as<std::string>()};
  return out;
}

std::vector<PendingJob> ReadPending(pqxx::transaction_base& tx, const std::string& formation,
                                     int limit) {
  auto rows = db::Exec(tx, kReadPending, formation, limit);
  std::vector<PendingJob> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    PendingJob p;
    p.request.id = r["id"].as<int64_t>();
    p.request.cpu = r["cpu"].as<int>();
    p.request.memory = r["memory"].as<int>();
    p.request.priority = r["priority"].as<int>();
    p.request.constraints = JsonToMap(r["constraints"].as<std::string>());
    p.request.privileged = r["privileged"].as<bool>();
    p.reason = r["reason"].as<std::string>();
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<SnapshotHost> LoadHostSnapshot(pqxx::transaction_base& tx, HostConfigs* configs) {
  auto rows = db::Exec(tx, kLoadHostSnapshot);
  std::vector<std::string> ids, stale;
  ids.reserve(rows.size());
  for (const auto& r : rows) {
    ids.push_back(r["id"].as<std::string>());
    auto it = configs->find(ids.back());
    if (it == configs->end() || it->second.version != r["config_version"].as<int64_t>()) {
      stale.push_back(ids.back());
    }
  }
  if (!stale.empty()) {
    for (const auto& r : db::Exec(tx, kLoadHostConfigs, db::ArrayParam(stale))) {
      HostConfig& c = (*configs)[r["id"].as<std::string>()];
      c.version = r["config_version"].as<int64_t>();
      c.labels = JsonToMap(r["labels"].as<std::string>());
      c.api_url = r["api_url"].as<std::string>();
      c.isolates = r["isolates"].as<bool>();
      c.ticket_key = r["ticket_key"].as<std::string>();
    }
  }
  std::vector<SnapshotHost> out;
  out.reserve(rows.size());
  HostConfigs seen;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto it = configs->find(ids[i]);
    if (it == configs->end()) continue;  // gone between the two statements
    const auto& r = rows[static_cast<pqxx::result::size_type>(i)];
    SnapshotHost h;
    h.view.id = ids[i];
    h.view.cpu_total = r["cpu"].as<int>();
    h.view.memory_total = r["memory"].as<int>();
    h.view.cpu_allocated = r["cpu_allocated"].as<int>();
    h.view.memory_allocated = r["memory_allocated"].as<int>();
    h.view.labels = it->second.labels;
    h.view.isolates = it->second.isolates;
    h.view.condition = r["condition"].as<std::string>();
    h.api_url = it->second.api_url;
    h.ticket_key = it->second.ticket_key;
    h.suspensions = r["suspensions"].as<int>();
    out.push_back(std::move(h));
    seen.insert(configs->extract(it));
  }
  configs->swap(seen);  // hosts no longer feasible are forgotten
  return out;
}

std::map<std::string, LockedHost> LockHosts(pqxx::transaction_base& tx,
                                            const std::vector<std::string>& ids) {
  std::map<std::string, LockedHost> out;
  for (const auto& r : db::Exec(tx, kLockHosts, db::ArrayParam(ids))) {
    out[r["id"].as<std::string>()] = {r["cpu"].as<int>(), r["memory"].as<int>(),
                                      r["cpu_allocated"].as<int>(),
                                      r["memory_allocated"].as<int>()};
  }
  return out;
}

std::vector<Assignment> AssignJobs(pqxx::transaction_base& tx,
                                   const std::vector<placement::Placement>& plan) {
  json p = json::array();
  for (const auto& pl : plan) p.push_back({{"job", pl.job_id}, {"host", pl.host_id}});
  auto rows = db::Exec(tx, kAssignJobs, p.dump());
  std::vector<Assignment> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    // The spec is kept as text and sent as is (parsing it and dumping it
    // again cost the scheduler more than placing the job); only invalid
    // UTF-8, which a SQL_ASCII database can hold, is replaced, so hostd can
    // parse it.
    out.push_back({r["job_id"].as<int64_t>(), r["attempt"].as<int>(),
                   r["host_id"].as<std::string>(), util::SanitizeUtf8(r["spec"].as<std::string>()),
                   r["uid"].as<std::string>()});
  }
  return out;
}

void SetPendingReasons(pqxx::transaction_base& tx, const std::map<int64_t, std::string>& reasons) {
  json r = json::array();
  for (const auto& [id, why] : reasons) r.push_back({{"job", id}, {"reason", why}});
  db::Exec(tx, kSetPendingReasons, r.dump());
}

std::vector<placement::ReplicaView> LiveReplicas(pqxx::transaction_base& tx,
                                                 const std::string& formation) {
  auto rows = db::Exec(tx, kLiveReplicas, formation);
  std::vector<placement::ReplicaView> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    auto name = r["state"].as<std::string>();
    auto state = model::ParseReplicaState(name);
    if (!state) {
      throw std::runtime_error("job " + r["id"].as<std::string>() + " has state \"" + name +
                               "\", which is not a live replica state");
    }
    out.push_back({r["id"].as<int64_t>(), *state, r["on_leaving_host"].as<bool>()});
  }
  return out;
}

int CreateReplicas(pqxx::transaction_base& tx, int formation_id, int count) {
  return db::Exec1(tx, kCreateReplicas, formation_id, count)["created"].as<int>();
}

void StopJobs(pqxx::transaction_base& tx, const std::vector<int64_t>& job_ids,
              const std::string& reason) {
  db::Exec(tx, kStopJobs, db::ArrayParam(job_ids), reason);
}

void DispatchSucceeded(pqxx::transaction_base& tx, const std::vector<std::string>& host_ids) {
  db::Exec(tx, kDispatchSucceeded, db::ArrayParam(host_ids));
}

int DispatchFailed(pqxx::transaction_base& tx, const std::string& host_id,
                   const std::vector<DispatchedJob>& jobs, const std::string& error) {
  json j = json::array();
  for (const auto& d : jobs) j.push_back({{"job", d.job_id}, {"attempt", d.attempt}});
  return db::Exec1(tx, kDispatchFailed, host_id, j.dump(), error)["requeued"].as<int>();
}

void DispatchUnanswered(pqxx::transaction_base& tx, const std::string& host_id) {
  db::Exec(tx, kDispatchUnanswered, host_id);
}

std::vector<StopToForward> StopsToForward(pqxx::transaction_base& tx) {
  auto rows = db::Exec(tx, kStopsToForward);
  std::vector<StopToForward> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    out.push_back({r["id"].as<int64_t>(), r["attempt"].as<int>(), r["host_id"].as<std::string>(),
                   r["api_url"].as<std::string>(), r["ticket_key"].as<std::string>(),
                   r["stop_force"].as<bool>()});
  }
  return out;
}

void RecordPassError(pqxx::transaction_base& tx, int formation, const std::string& error,
                     int failures) {
  db::Exec0(tx, kRecordPassError, formation, error.substr(0, 2000), failures);
}

void ClearPassError(pqxx::transaction_base& tx, int formation) {
  db::Exec0(tx, kClearPassError, formation);
}

}  // namespace pgfleet::schedulerd::store
