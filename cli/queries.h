#pragma once
// The CLI's store: every SQL statement the pgfleet command runs, as a named
// statement in queries.sql (a db::Statement built from it), used by
// queries.cpp behind typed functions that return plain structs read by
// column name. Command files hold no SQL.
//
// Command::Connect calls PrepareQueries on its connection (libpqxx prepares
// each statement on the server at its first use, so a short-lived command
// pays only for the statements it runs). Every function runs in the caller's
// transaction and commits nothing; writes take effect when the caller commits.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "core/model/job_spec.h"
#include "core/model/states.h"

namespace pgfleet::cli {

// Defines every statement below on conn (once per connection).
void PrepareQueries(pqxx::connection& conn);

// --- jobs ---

// When a submitted job may start (jobs.after, jobs.not_before).
struct JobStart {
  std::vector<int64_t> after;  // jobs that must succeed first; empty: none
  std::string at;              // not before this time, as PostgreSQL printed it ("" when none)
  double in_seconds = 0;       // else, when > 0: not before this long from now
  std::optional<bool> preemptible;  // jobs.preemptible; nullopt: the column's default (true)
};

// Submits through pgfleet.submit (named arguments) and returns the job's id;
// with an idempotency_key already used, the id of that job (nothing created).
// An empty key, rootfs or user is passed as null.
int64_t Submit(pqxx::transaction_base& tx, const model::JobSpec& spec,
               const std::string& idempotency_key, const JobStart& start = {});

// A time as PostgreSQL reads a timestamptz (`pgfleet run --at`): as it
// prints it, whether it is finite, and how far ahead of now (seconds,
// negative when past). Throws pqxx::data_exception for text it cannot read.
struct StartTime {
  std::string text;
  bool finite = false;
  double seconds_from_now = 0;
};
StartTime ReadStartTime(pqxx::transaction_base& tx, const std::string& text);

// Where a job stands and where its output is: what `run --wait` and `logs` read.
struct JobProgress {
  model::JobState state = model::JobState::kPending;
  int attempt = 0;      // 0 until the job first runs
  std::string host_id;  // "" when never placed
  std::string api_url;  // the host's API, "" when unknown
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<std::string> output_tail;  // last 4 KiB, kept once the attempt ended
  std::optional<std::string> error;        // why the job failed or was cancelled
};
// nullopt when the job does not exist.
std::optional<JobProgress> GetJobProgress(pqxx::transaction_base& tx, int64_t job);

// Waiting for jobs (pgfleet wait): LISTEN on model::kJobChannel first, then
// WatchJobs; each change of a watched job NOTIFYs its id. UnwatchJobs when done.
void WatchJobs(pqxx::transaction_base& tx, const std::vector<int64_t>& jobs);
void UnwatchJobs(pqxx::transaction_base& tx);
struct WaitedJob {
  int64_t id = 0;
  model::JobState state = model::JobState::kPending;
  int attempt = 0;
  std::string host_id;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<std::string> error;  // pending: why not placed, or the last failure
  double retry_in_seconds = 0;       // pending after a failure: until the next attempt
};
// The jobs among `jobs` the caller may see, by id.
std::vector<WaitedJob> GetWaitedJobs(pqxx::transaction_base& tx, const std::vector<int64_t>& jobs);

// Where an attempt ran, from its 'assigned' event.
struct AttemptHost {
  std::string host_id;
  std::string api_url;  // "" when the host is no longer registered
};
// nullopt when the job has no such attempt.
std::optional<AttemptHost> GetAttemptHost(pqxx::transaction_base& tx, int64_t job, int attempt);

// pgfleet.log_ticket: a ticket to read the attempt's output from its host
// (only the job's owner and operators get one); "" with *why when refused.
// Runs outside any transaction of conn.
std::string LogTicket(pqxx::connection& conn, int64_t job, int attempt, std::string* why);

// pgfleet.host_ticket: a ticket of kind "logs", "fs" or "exec" for the
// attempt (0: the latest) and where its host is; nullopt with *why when the
// database refuses (not the job's owner or an operator, not running for
// exec...). Runs outside any transaction of conn.
struct HostTicketGrant {
  std::string host_id, api_url, ticket;
  int attempt = 0;
};
std::optional<HostTicketGrant> HostTicket(pqxx::connection& conn, int64_t job,
                                          const std::string& kind, int attempt, std::string* why);

struct JobFilter {
  bool all = false;          // include final jobs
  std::string formation;     // "" = every formation
  int limit = 100;           // newest first
  std::string state;         // "" = any (a final state implies `all`)
  double since_seconds = 0;  // created within this long; 0 = any time
  std::string host;          // "" = any host
};
struct JobRow {
  int64_t id = 0;
  std::string formation;
  model::JobState state = model::JobState::kPending;
  int attempt = 0;
  std::string host_id;  // "" when not placed
  int cpu = 0;          // millicores
  int memory = 0;       // MiB
  std::string created;  // "YYYY-MM-DD HH24:MI:SS", the database's time zone
  std::string command;  // argv joined by spaces
  std::string error;    // "" when none
  // In use now (hostd --usage-interval): cores ("0.98") and "12.3Mi"; "" when
  // the job is not running or not measured yet.
  std::string cpu_used, memory_used;
  // jobs.health (unknown, healthy, unhealthy); "" for a job without a health check.
  std::string health;
  std::string json;  // the whole pgfleet.jobs row as a JSON object
};
std::vector<JobRow> ListJobs(pqxx::transaction_base& tx, const JobFilter& filter);

// The pgfleet.jobs row as a JSON object with its events (oldest first) under
// "events"; nullopt when the job does not exist.
std::optional<nlohmann::json> InspectJob(pqxx::transaction_base& tx, int64_t job);

// pgfleet.cancel: returns "cancelled", "stopping", or the final state the job
// already had.
// force: pgfleet.force_stop (killed at once, no grace) instead of pgfleet.cancel.
std::string CancelJob(pqxx::transaction_base& tx, int64_t job, bool force = false);

// --- events ---

struct EventRow {
  int64_t id = 0;
  std::string at;  // "YYYY-MM-DD HH24:MI:SS.MS"
  int64_t job_id = 0;
  int attempt = 0;
  std::string kind;
  std::string host_id;  // "" when none
  std::string detail;   // "" when none
  std::string json;     // the whole pgfleet.job_events row as a JSON object
};
// The newest `limit` events with id > after_id (of one job, or of all when
// job == 0), returned oldest first.
std::vector<EventRow> ListEvents(pqxx::transaction_base& tx, int64_t job, int64_t after_id,
                                 int limit);

// --- hosts ---

struct HostRow {
  std::string id;
  std::string shown_state;    // state, with " (heartbeat late)" / " (suspended)" /
                              // " (disk pressure)" when so
  std::string condition;      // why it takes no new work, "" when it does
  std::string heartbeat_age;  // seconds, "-" when never heard from
  std::string cpu;            // "free/totalm"
  std::string memory;         // "free/totalMi"
  std::string running_jobs;
  std::string cpu_used, memory_used;  // by its running jobs now: cores, "12.3Mi"; "" if none
  std::string labels;                 // JSON object
  std::string driver;
  std::string driver_note;  // "" when none
  std::string api_url;
  std::string json;  // the whole pgfleet.host_status row as a JSON object
};
std::vector<HostRow> ListHosts(pqxx::transaction_base& tx);

// --- endpoints ---

// A row of pgfleet.endpoints, as text ("" where null).
struct EndpointRow {
  std::string formation;
  int64_t job = 0;
  int attempt = 0;
  std::string host;
  std::string address;    // the host's
  std::string port_name;  // "" for a bridge job without ports
  std::string port;
  std::string job_address;  // on the host's bridge; "" for other networks
  std::string health;
  std::string since;
  std::string json;  // the whole row as a JSON object
};
// pgfleet.endpoints of one formation ("" = all the caller may see), in order.
std::vector<EndpointRow> ListEndpoints(pqxx::transaction_base& tx, const std::string& formation);
// pgfleet.watch_endpoints / unwatch_endpoints for this session.
void WatchEndpoints(pqxx::transaction_base& tx, const std::string& formation);
void UnwatchEndpoints(pqxx::transaction_base& tx);

// pgfleet.drain; deadline_seconds nullopt = batch jobs may run to completion.
void DrainHost(pqxx::transaction_base& tx, const std::string& host,
               std::optional<double> deadline_seconds);
// pgfleet.set_host_state (up, draining or offline).
void SetHostState(pqxx::transaction_base& tx, const std::string& host, const std::string& state);

// --- formations and the cluster ---

// pgfleet.cluster_summary as a JSON object.
nlohmann::json ClusterSummary(pqxx::transaction_base& tx);
// pgfleet.formation_status rows as a JSON array of objects, by name.
nlohmann::json FormationStatuses(pqxx::transaction_base& tx);

// pgfleet.scale.
void ScaleFormation(pqxx::transaction_base& tx, const std::string& name, int replicas);

struct NewFormation {
  std::string name;
  std::string kind = "batch";  // or "service", "system", "sysbatch", "cron"
  int replicas = 0;
  std::string spread;  // formations.spread: "" packs; "host" or a host label key
  // The replicas' template: every field of a job that says how it runs
  // (pgfleet.template_columns()); command empty = none, stored as null.
  model::JobSpec job;
  // A cron formation's schedule (formations.cron, time_zone, overlap,
  // catch_up; docs/cron.md); cron and time_zone "" for other kinds.
  std::string cron, time_zone, overlap = "skip";
  int catch_up = 1;
};
// Inserts into pgfleet.formations; returns the new formation's id.
int CreateFormation(pqxx::transaction_base& tx, const NewFormation& f);
// pgfleet.formation_done: marks a sysbatch formation done; when it was.
std::string FormationDone(pqxx::transaction_base& tx, const std::string& name);
// pgfleet.delete_formation: what became of it, in words.
std::string DeleteFormation(pqxx::transaction_base& tx, const std::string& name);
// pgfleet.remove_host.
void RemoveHost(pqxx::transaction_base& tx, const std::string& host);
// pgfleet.admit_host: the host may get jobs, offering at most cpu, memory
// and labels (each null: what it declares now).
void AdmitHost(pqxx::transaction_base& tx, const std::string& host, std::optional<int> cpu,
               std::optional<int> memory, const std::optional<std::string>& labels_json);

// --- versions and rollouts ---

// pgfleet.update_formation: changes the columns `changes` names (an object);
// returns the formation's version after.
int UpdateFormation(pqxx::transaction_base& tx, const std::string& name,
                    const nlohmann::json& changes);
// pgfleet.formation_versions of a formation, newest first, as JSON objects.
nlohmann::json FormationHistory(pqxx::transaction_base& tx, const std::string& name);
// pgfleet.revert.
void RevertFormation(pqxx::transaction_base& tx, const std::string& name, int version);
// pgfleet.promote.
void PromoteFormation(pqxx::transaction_base& tx, const std::string& name);
// A formation's pgfleet.formation_status row; nullopt when there is none.
std::optional<nlohmann::json> FormationStatus(pqxx::transaction_base& tx, const std::string& name);
// Its newest `limit` pgfleet.rollout_status rows, newest first.
nlohmann::json Rollouts(pqxx::transaction_base& tx, const std::string& name, int limit);

// pgfleet.owner_quota_status rows the caller may see, by owner (docs/limits.md).
nlohmann::json OwnerQuotas(pqxx::transaction_base& tx);

}  // namespace pgfleet::cli
