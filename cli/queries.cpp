#include "cli/queries.h"

#include <stdexcept>

#include "cli/queries.sql.h"
#include "core/db/statements.h"

namespace pgfleet::cli {
namespace {

using nlohmann::json;

template <typename T>
std::optional<T> Nullable(const pqxx::field& f) {
  return f.is_null() ? std::nullopt : std::optional<T>(f.as<T>());
}

model::JobState JobStateOf(const pqxx::field& f) {
  auto s = model::ParseJobState(f.as<std::string>());
  if (!s) throw std::runtime_error("unknown job state \"" + f.as<std::string>() + "\"");
  return *s;
}

}  // namespace

void PrepareQueries(pqxx::connection& conn) {
  db::PrepareAll(conn, {&kSubmit,           &kJobProgress,      &kWatchJobs,      &kUnwatchJobs,
                        &kWaitedJobs,       &kAttemptHost,      &kLogTicket,      &kHostTicket,
                        &kListJobs,         &kJobDocument,      &kJobEvents,      &kCancel,
                        &kForceStop,        &kListEvents,       &kListHosts,      &kDrain,
                        &kSetHostState,     &kClusterSummary,   &kFormationStatuses, &kScale,
                        &kCreateFormation,  &kDeleteFormation,  &kFormationDone,  &kRemoveHost,
                        &kAdmitHost,        &kUpdateFormation,  &kFormationHistory, &kRevert,
                        &kPromote,          &kFormationStatus,  &kRollouts,
                        &kEndpoints,        &kWatchEndpoints,   &kUnwatchEndpoints,
                        &kOwnerQuotas,      &kStartTime,        &kPlacementRequest, &kPlacementHosts,
                        &kPreemptionCandidates, &kPreemptionBudgets});
}

namespace {
// The spec's health check as a jsonb parameter; null for none.
std::optional<std::string> HealthCheckParam(const model::JobSpec& s) {
  if (!s.health_check) return std::nullopt;
  return model::ToJson(*s.health_check).dump();
}
// The spec's files as a jsonb parameter; null for none.
std::optional<std::string> FilesParam(const model::JobSpec& s) {
  if (s.files.empty()) return std::nullopt;
  return model::ToJson(s.files).dump();
}
// The spec's named ports as a jsonb parameter; null for none.
std::optional<std::string> PortsParam(const model::JobSpec& s) {
  if (s.ports.empty()) return std::nullopt;
  return json(s.ports).dump();
}
}  // namespace

int64_t Submit(pqxx::transaction_base& tx, const model::JobSpec& s,
               const std::string& idempotency_key, const JobStart& start) {
  std::optional<std::string> after;
  if (!start.after.empty()) after = db::ArrayParam(start.after);
  std::optional<double> in;
  if (start.in_seconds > 0) in = start.in_seconds;
  return db::Exec1(tx, kSubmit, db::ArrayParam(s.command), s.formation, s.cpu, s.memory,
                   json(s.env).dump(), json(s.constraints).dump(), s.priority, s.max_attempts,
                   db::NullIfEmpty(idempotency_key), db::NullIfEmpty(s.rootfs),
                   db::NullIfEmpty(s.user), db::NullIfEmpty(s.network), s.pids_max,
                   s.cpu_hard_limit, s.stop_grace_seconds, s.disk, s.seccomp,
                   HealthCheckParam(s), PortsParam(s), after, db::NullIfEmpty(start.at), in,
                   FilesParam(s), start.preemptible)["id"]
      .as<int64_t>();
}

StartTime ReadStartTime(pqxx::transaction_base& tx, const std::string& text) {
  auto r = db::Exec1(tx, kStartTime, text);
  return {r["text"].as<std::string>(), r["finite"].as<bool>(),
          r["seconds_from_now"].is_null() ? 0 : r["seconds_from_now"].as<double>()};
}

std::optional<AttemptHost> GetAttemptHost(pqxx::transaction_base& tx, int64_t job, int attempt) {
  auto rows = db::Exec(tx, kAttemptHost, job, attempt);
  if (rows.empty()) return std::nullopt;
  return AttemptHost{rows[0]["host_id"].as<std::string>(), rows[0]["api_url"].as<std::string>()};
}

std::string LogTicket(pqxx::connection& conn, int64_t job, int attempt, std::string* why) {
  try {
    pqxx::nontransaction tx(conn);
    return db::Exec1(tx, kLogTicket, job, attempt)["ticket"].as<std::string>();
  } catch (const pqxx::sql_error& e) {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    if (msg.rfind("ERROR:  ", 0) == 0) msg = msg.substr(8);
    *why = msg;
    return "";
  }
}

std::optional<HostTicketGrant> HostTicket(pqxx::connection& conn, int64_t job,
                                          const std::string& kind, int attempt, std::string* why) {
  try {
    pqxx::nontransaction tx(conn);
    auto r = db::Exec1(tx, kHostTicket, job, kind, attempt);
    return HostTicketGrant{r["host_id"].as<std::string>(), r["api_url"].as<std::string>(),
                           r["ticket"].as<std::string>(), r["attempt"].as<int>()};
  } catch (const pqxx::sql_error& e) {
    std::string msg = e.what();
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    if (msg.rfind("ERROR:  ", 0) == 0) msg = msg.substr(8);
    *why = msg;
    return std::nullopt;
  }
}

std::optional<JobProgress> GetJobProgress(pqxx::transaction_base& tx, int64_t job) {
  auto rows = db::Exec(tx, kJobProgress, job);
  if (rows.empty()) return std::nullopt;
  const auto& r = rows[0];
  JobProgress p;
  p.state = JobStateOf(r["state"]);
  p.attempt = r["attempt"].as<int>();
  p.host_id = r["host_id"].as<std::string>();
  p.api_url = r["api_url"].as<std::string>();
  p.exit_code = Nullable<int>(r["exit_code"]);
  p.signal = Nullable<int>(r["signal"]);
  p.output_tail = Nullable<std::string>(r["output_tail"]);
  p.error = Nullable<std::string>(r["error"]);
  return p;
}

void WatchJobs(pqxx::transaction_base& tx, const std::vector<int64_t>& jobs) {
  db::Exec(tx, kWatchJobs, db::ArrayParam(jobs));
}

void UnwatchJobs(pqxx::transaction_base& tx) { db::Exec(tx, kUnwatchJobs); }

std::vector<WaitedJob> GetWaitedJobs(pqxx::transaction_base& tx, const std::vector<int64_t>& jobs) {
  std::vector<WaitedJob> out;
  for (const auto& r : db::Exec(tx, kWaitedJobs, db::ArrayParam(jobs))) {
    WaitedJob j;
    j.id = r["id"].as<int64_t>();
    j.state = JobStateOf(r["state"]);
    j.attempt = r["attempt"].as<int>();
    j.host_id = r["host_id"].as<std::string>();
    j.exit_code = Nullable<int>(r["exit_code"]);
    j.signal = Nullable<int>(r["signal"]);
    j.error = Nullable<std::string>(r["error"]);
    j.retry_in_seconds = r["retry_in"].is_null() ? 0 : r["retry_in"].as<double>();
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<JobRow> ListJobs(pqxx::transaction_base& tx, const JobFilter& filter) {
  std::vector<JobRow> out;
  for (const auto& r : db::Exec(tx, kListJobs, filter.all, filter.formation, filter.limit,
                                filter.state, filter.since_seconds, filter.host)) {
    JobRow j;
    j.id = r["id"].as<int64_t>();
    j.formation = r["formation"].as<std::string>();
    j.state = JobStateOf(r["state"]);
    j.attempt = r["attempt"].as<int>();
    j.host_id = r["host_id"].as<std::string>();
    j.cpu = r["cpu"].as<int>();
    j.memory = r["memory"].as<int>();
    j.health = r["health"].as<std::string>();
    j.created = r["created"].as<std::string>();
    j.command = r["command"].as<std::string>();
    j.error = r["error"].as<std::string>();
    j.cpu_used = r["cpu_used"].as<std::string>();
    j.memory_used = r["memory_used"].as<std::string>();
    j.json = r["doc"].as<std::string>();
    out.push_back(std::move(j));
  }
  return out;
}

std::optional<json> InspectJob(pqxx::transaction_base& tx, int64_t job) {
  auto rows = db::Exec(tx, kJobDocument, job);
  if (rows.empty()) return std::nullopt;
  json doc = json::parse(rows[0]["doc"].as<std::string>());
  doc["events"] = json::parse(db::Exec1(tx, kJobEvents, job)["doc"].as<std::string>());
  return doc;
}

std::string CancelJob(pqxx::transaction_base& tx, int64_t job, bool force) {
  return db::Exec1(tx, force ? kForceStop : kCancel, job)["result"].as<std::string>();
}

std::vector<EventRow> ListEvents(pqxx::transaction_base& tx, int64_t job, int64_t after_id,
                                 int limit) {
  std::vector<EventRow> out;
  for (const auto& r : db::Exec(tx, kListEvents, job, after_id, limit)) {
    EventRow e;
    e.id = r["id"].as<int64_t>();
    e.at = r["at"].as<std::string>();
    e.job_id = r["job_id"].as<int64_t>();
    e.attempt = r["attempt"].as<int>();
    e.kind = r["kind"].as<std::string>();
    e.host_id = r["host_id"].as<std::string>();
    e.detail = r["detail"].as<std::string>();
    e.json = r["doc"].as<std::string>();
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<HostRow> ListHosts(pqxx::transaction_base& tx) {
  std::vector<HostRow> out;
  for (const auto& r : db::Exec(tx, kListHosts)) {
    HostRow h;
    h.id = r["id"].as<std::string>();
    h.shown_state = r["shown_state"].as<std::string>();
    h.condition = r["condition"].as<std::string>();
    h.heartbeat_age = r["heartbeat_age"].as<std::string>();
    h.cpu = r["cpu"].as<std::string>();
    h.memory = r["memory"].as<std::string>();
    h.running_jobs = r["running_jobs"].as<std::string>();
    h.cpu_used = r["cpu_used"].as<std::string>();
    h.memory_used = r["memory_used"].as<std::string>();
    h.labels = r["labels"].as<std::string>();
    h.driver = r["driver"].as<std::string>();
    h.driver_note = r["driver_note"].as<std::string>();
    h.api_url = r["api_url"].as<std::string>();
    h.json = r["doc"].as<std::string>();
    out.push_back(std::move(h));
  }
  return out;
}

void DrainHost(pqxx::transaction_base& tx, const std::string& host,
               std::optional<double> deadline_seconds) {
  db::Exec(tx, kDrain, host, deadline_seconds);
}

void SetHostState(pqxx::transaction_base& tx, const std::string& host, const std::string& state) {
  db::Exec(tx, kSetHostState, host, state);
}

json ClusterSummary(pqxx::transaction_base& tx) {
  return json::parse(db::Exec1(tx, kClusterSummary)["doc"].as<std::string>());
}

json OwnerQuotas(pqxx::transaction_base& tx) {
  json out = json::array();
  for (const auto& r : db::Exec(tx, kOwnerQuotas)) {
    out.push_back(json::parse(r["doc"].as<std::string>()));
  }
  return out;
}

json FormationStatuses(pqxx::transaction_base& tx) {
  json out = json::array();
  for (const auto& r : db::Exec(tx, kFormationStatuses)) {
    out.push_back(json::parse(r["doc"].as<std::string>()));
  }
  return out;
}

void ScaleFormation(pqxx::transaction_base& tx, const std::string& name, int replicas) {
  db::Exec(tx, kScale, name, replicas);
}

int CreateFormation(pqxx::transaction_base& tx, const NewFormation& f) {
  const model::JobSpec& s = f.job;
  auto rows =
      db::Exec(tx, kCreateFormation, f.name, f.kind, f.replicas, db::ArrayParam(s.command),
               json(s.env).dump(), s.cpu, s.memory, json(s.constraints).dump(), s.priority,
               db::NullIfEmpty(s.rootfs), db::NullIfEmpty(s.user), db::NullIfEmpty(s.network),
               s.pids_max, s.cpu_hard_limit, s.stop_grace_seconds, s.disk, s.seccomp,
               db::NullIfEmpty(f.spread), s.max_attempts, HealthCheckParam(s), PortsParam(s),
               db::NullIfEmpty(f.cron), db::NullIfEmpty(f.time_zone), f.overlap, f.catch_up, FilesParam(s));
  if (rows.empty()) {
    // The name is taken by a formation in use (a deleted one would have come back).
    throw std::runtime_error("formation \"" + f.name +
                             "\" already exists (pgfleet formation scale changes its replicas)");
  }
  return rows[0]["id"].as<int>();
}

std::string FormationDone(pqxx::transaction_base& tx, const std::string& name) {
  return db::Exec1(tx, kFormationDone, name)["done_at"].as<std::string>();
}

std::string DeleteFormation(pqxx::transaction_base& tx, const std::string& name) {
  return db::Exec1(tx, kDeleteFormation, name)["result"].as<std::string>();
}

void AdmitHost(pqxx::transaction_base& tx, const std::string& host, std::optional<int> cpu,
               std::optional<int> memory, const std::optional<std::string>& labels_json) {
  db::Exec(tx, kAdmitHost, host, cpu, memory, labels_json);
}

void RemoveHost(pqxx::transaction_base& tx, const std::string& host) {
  db::Exec(tx, kRemoveHost, host);
}

// --- versions and rollouts ---

int UpdateFormation(pqxx::transaction_base& tx, const std::string& name, const json& changes) {
  return db::Exec1(tx, kUpdateFormation, name, changes.dump())["version"].as<int>();
}

json FormationHistory(pqxx::transaction_base& tx, const std::string& name) {
  json out = json::array();
  for (const auto& r : db::Exec(tx, kFormationHistory, name)) {
    out.push_back({{"version", r["version"].as<int>()},
                   {"created_at", r["created_at"].as<std::string>()},
                   {"created_by", r["created_by"].as<std::string>()},
                   {"changed", r["changed"].as<std::string>()},
                   {"note", r["note"].as<std::string>()},
                   {"was_healthy", r["was_healthy"].as<bool>()},
                   {"current", r["current"].as<bool>()},
                   {"template", json::parse(r["template"].as<std::string>())}});
  }
  return out;
}

void RevertFormation(pqxx::transaction_base& tx, const std::string& name, int version) {
  db::Exec(tx, kRevert, name, version);
}

void PromoteFormation(pqxx::transaction_base& tx, const std::string& name) {
  db::Exec(tx, kPromote, name);
}

std::optional<json> FormationStatus(pqxx::transaction_base& tx, const std::string& name) {
  auto rows = db::Exec(tx, kFormationStatus, name);
  if (rows.empty()) return std::nullopt;
  return json::parse(rows[0]["doc"].as<std::string>());
}

json Rollouts(pqxx::transaction_base& tx, const std::string& name, int limit) {
  json out = json::array();
  for (const auto& r : db::Exec(tx, kRollouts, name, limit)) {
    out.push_back(json::parse(r["doc"].as<std::string>()));
  }
  return out;
}

std::vector<EndpointRow> ListEndpoints(pqxx::transaction_base& tx, const std::string& formation) {
  std::vector<EndpointRow> out;
  for (const auto& r : db::Exec(tx, kEndpoints, formation)) {
    EndpointRow e;
    e.formation = r["formation"].as<std::string>();
    e.job = r["job"].as<int64_t>();
    e.attempt = r["attempt"].as<int>();
    e.host = r["host"].as<std::string>();
    e.address = r["address"].as<std::string>();
    e.port_name = r["port_name"].as<std::string>();
    e.port = r["port"].as<std::string>();
    e.job_address = r["job_address"].as<std::string>();
    e.health = r["health"].as<std::string>();
    e.since = r["since"].as<std::string>();
    e.json = r["doc"].as<std::string>();
    out.push_back(std::move(e));
  }
  return out;
}

void WatchEndpoints(pqxx::transaction_base& tx, const std::string& formation) {
  db::Exec(tx, kWatchEndpoints, formation);
}

void UnwatchEndpoints(pqxx::transaction_base& tx) { db::Exec(tx, kUnwatchEndpoints); }

}  // namespace pgfleet::cli
