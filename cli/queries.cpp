#include "cli/queries.h"

#include <stdexcept>

#include "core/db/statements.h"

namespace pgfleet::cli {
namespace {

using nlohmann::json;

// --- the statements ---

constexpr db::Statement kSubmit{
    "cli_submit",
    "select pgfleet.submit(command => $1::text[], formation => $2::text, cpu => $3::integer,"
    "                      memory => $4::integer, env => $5::jsonb, constraints => $6::jsonb,"
    "                      priority => $7::integer, max_attempts => $8::integer,"
    "                      idempotency_key => $9::text, rootfs => $10::text, run_as => $11::text,"
    "                      network => $12::text, pids_max => $13::integer,"
    "                      cpu_hard_limit => $14::boolean, stop_grace_seconds => $15::integer,"
    "                      disk => $16::integer, seccomp => $17::text)"
    "       as id"};

constexpr db::Statement kJobProgress{
    "cli_job_progress",
    "select j.state, j.attempt, coalesce(j.host_id, '') as host_id,"
    "       coalesce(h.api_url, '') as api_url, j.exit_code, j.signal, j.output_tail, j.error"
    "  from pgfleet.visible_jobs j left join pgfleet.hosts h on h.id = j.host_id"
    " where j.id = $1"};

constexpr db::Statement kWatchJobs{"cli_watch_jobs", "select pgfleet.watch_jobs($1::bigint[])"};
constexpr db::Statement kUnwatchJobs{"cli_unwatch_jobs", "select pgfleet.unwatch_jobs()"};
constexpr db::Statement kWaitedJobs{
    "cli_waited_jobs",
    "select j.id, j.state, j.attempt, coalesce(j.host_id, '') as host_id, j.exit_code,"
    "       j.signal, j.error,"
    "       greatest(extract(epoch from j.not_before - now()), 0)::double precision as retry_in"
    "  from pgfleet.visible_jobs j where j.id = any($1::bigint[]) order by j.id"};

constexpr db::Statement kLogTicket{"cli_log_ticket",
                                   "select ticket from pgfleet.log_ticket($1, $2)"};

constexpr db::Statement kHostTicket{
    "cli_host_ticket",
    "select host_id, coalesce(api_url, '') as api_url, attempt, ticket"
    "  from pgfleet.host_ticket($1, $2, nullif($3, 0))"};

constexpr db::Statement kAttemptHost{
    "cli_attempt_host",
    "select e.host_id, coalesce(h.api_url, '') as api_url"
    "  from pgfleet.job_events e left join pgfleet.hosts h on h.id = e.host_id"
    " where e.job_id = $1 and e.attempt = $2 and e.kind = 'assigned' and e.host_id is not null"
    " order by e.id limit 1"};

constexpr db::Statement kListJobs{
    "cli_list_jobs",
    "select j.id, j.formation, j.state, j.attempt, coalesce(j.host_id, '') as host_id, j.cpu,"
    "       j.memory, to_char(j.created_at, 'YYYY-MM-DD HH24:MI:SS') as created,"
    "       array_to_string(j.command, ' ') as command, coalesce(j.error, '') as error,"
    "       coalesce(to_char(j.cpu_used, 'FM9999990.00'), '') as cpu_used,"
    "       coalesce(round(j.memory_used_bytes / 1048576.0, 1) || 'Mi', '') as memory_used,"
    "       to_jsonb(j)::text as doc"
    "  from pgfleet.visible_jobs j"
    " where ($1::boolean or $4::text <> '' or j.state in ('pending', 'assigned', 'running'))"
    "   and ($2::text = '' or j.formation = $2::text)"
    "   and ($4::text = '' or j.state = $4::text)"
    "   and ($5::double precision = 0"
    "        or j.created_at > now() - make_interval(secs => $5::double precision))"
    "   and ($6::text = '' or j.host_id = $6::text)"
    " order by j.id desc limit $3"};

constexpr db::Statement kJobDocument{
    "cli_job_document",
    "select to_jsonb(j)::text as doc from pgfleet.visible_jobs j where j.id = $1"};

constexpr db::Statement kJobEvents{"cli_job_events",
                                   "select coalesce(json_agg(e order by e.id), '[]')::text as doc"
                                   "  from pgfleet.job_events e where e.job_id = $1"};

constexpr db::Statement kCancel{"cli_cancel", "select pgfleet.cancel($1) as result"};
constexpr db::Statement kForceStop{"cli_force_stop", "select pgfleet.force_stop($1) as result"};

constexpr db::Statement kListEvents{
    "cli_list_events",
    "select * from ("
    "  select e.id, to_char(e.at, 'YYYY-MM-DD HH24:MI:SS.MS') as at, e.job_id, e.attempt, e.kind,"
    "         coalesce(e.host_id, '') as host_id, coalesce(e.detail, '') as detail,"
    "         to_jsonb(e)::text as doc"
    "    from pgfleet.job_events e"
    "   where ($1::bigint = 0 or e.job_id = $1::bigint) and e.id > $2"
    "   order by e.id desc limit $3) x"
    " order by x.id"};

constexpr db::Statement kListHosts{
    "cli_list_hosts",
    "select h.id,"
    "       case when h.state = 'up' and not h.alive then 'up (heartbeat late)' else h.state end"
    "         || case when coalesce(h.suspended, false) then ' (suspended)' else '' end"
    "         || coalesce(' (' || split_part(h.condition, ':', 1) || ')', '')"
    "         || case when h.admitted then '' else ' (not admitted)' end"
    "         || coalesce(' (declares ' || h.beyond_allowance || ' beyond its allowance)', '')"
    "         as shown_state,"
    "       coalesce(h.condition, '') as condition,"
    "       coalesce(h.heartbeat_age_s::text, '-') as heartbeat_age,"
    "       h.cpu_free || '/' || h.cpu || 'm' as cpu,"
    "       h.memory_free || '/' || h.memory || 'Mi' as memory, h.running_jobs,"
    "       coalesce(to_char(h.cpu_used, 'FM9999990.00'), '') as cpu_used,"
    "       coalesce(round(h.memory_used_bytes / 1048576.0, 1) || 'Mi', '') as memory_used,"
    "       h.labels::text as labels, h.driver, coalesce(h.driver_note, '') as driver_note,"
    "       h.api_url, to_jsonb(h)::text as doc"
    "  from pgfleet.host_status h order by h.id"};

constexpr db::Statement kDrain{"cli_drain",
                               "select pgfleet.drain($1, make_interval(secs => $2::float8))"};

constexpr db::Statement kSetHostState{"cli_set_host_state",
                                      "select pgfleet.set_host_state($1, $2)"};

constexpr db::Statement kClusterSummary{
    "cli_cluster_summary", "select to_jsonb(c)::text as doc from pgfleet.cluster_summary c"};

constexpr db::Statement kFormationStatuses{
    "cli_formation_statuses",
    "select to_jsonb(f)::text as doc from pgfleet.formation_status f order by f.name"};

constexpr db::Statement kScale{"cli_scale", "select pgfleet.scale($1, $2)"};

constexpr db::Statement kCreateFormation{
    "cli_create_formation",
    "insert into pgfleet.formations (name, kind, replicas, command, env, cpu, memory,"
    "                                constraints, priority, rootfs, run_as, network, pids_max,"
    "                                cpu_hard_limit, stop_grace_seconds, disk, seccomp)"
    " values ($1, $2, $3, nullif($4::text[], '{}'), $5::jsonb, $6, $7, $8::jsonb, $9, $10, $11,"
    "         coalesce($12, pgfleet.default_network()), $13, $14, $15, $16, $17)"
    // A deleted formation of that name (kept for its jobs' history) comes back.
    " on conflict (name) do update set"
    "   kind = excluded.kind, replicas = excluded.replicas, command = excluded.command,"
    "   env = excluded.env, cpu = excluded.cpu, memory = excluded.memory,"
    "   constraints = excluded.constraints, priority = excluded.priority,"
    "   rootfs = excluded.rootfs, run_as = excluded.run_as, network = excluded.network,"
    "   pids_max = excluded.pids_max, cpu_hard_limit = excluded.cpu_hard_limit,"
    "   stop_grace_seconds = excluded.stop_grace_seconds, disk = excluded.disk,"
    "   seccomp = excluded.seccomp,"
    "   deleted_at = null, updated_at = now()"
    "   where pgfleet.formations.deleted_at is not null"
    " returning id"};

constexpr db::Statement kDeleteFormation{"cli_delete_formation",
                                         "select pgfleet.delete_formation($1) as result"};
constexpr db::Statement kRemoveHost{"cli_remove_host", "select pgfleet.remove_host($1)"};
constexpr db::Statement kAdmitHost{
    "cli_admit_host",
    "select pgfleet.admit_host($1, $2::integer, $3::integer, $4::jsonb)"};

// --- helpers ---

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
  db::PrepareAll(conn, {&kSubmit,          &kJobProgress,       &kWatchJobs, &kUnwatchJobs,
                        &kWaitedJobs,      &kAttemptHost,       &kLogTicket, &kHostTicket,
                        &kListJobs,        &kJobDocument,       &kJobEvents, &kCancel, &kForceStop,
                        &kListEvents,      &kListHosts,         &kDrain,     &kSetHostState,
                        &kClusterSummary,  &kFormationStatuses, &kScale,     &kCreateFormation,
                        &kDeleteFormation, &kRemoveHost,        &kAdmitHost});
}

int64_t Submit(pqxx::transaction_base& tx, const model::JobSpec& s,
               const std::string& idempotency_key) {
  return db::Exec1(tx, kSubmit, db::ArrayParam(s.command), s.formation, s.cpu, s.memory,
                   json(s.env).dump(), json(s.constraints).dump(), s.priority, s.max_attempts,
                   db::NullIfEmpty(idempotency_key), db::NullIfEmpty(s.rootfs),
                   db::NullIfEmpty(s.user), db::NullIfEmpty(s.network), s.pids_max,
                   s.cpu_hard_limit, s.stop_grace_seconds, s.disk, s.seccomp)["id"]
      .as<int64_t>();
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
               s.pids_max, s.cpu_hard_limit, s.stop_grace_seconds, s.disk, s.seccomp);
  if (rows.empty()) {
    // The name is taken by a formation in use (a deleted one would have come back).
    throw std::runtime_error("formation \"" + f.name +
                             "\" already exists (pgfleet formation scale changes its replicas)");
  }
  return rows[0]["id"].as<int>();
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

}  // namespace pgfleet::cli
