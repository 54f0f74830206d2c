#pragma once
// hostd's statements: every SQL statement hostd runs (store.sql), named and
// prepared once per connection (Prepare, from ReconnectingConnection::SetOnConnect),
// each behind a typed function that reads its result columns by name. The
// SQL functions called here (pgfleet.register_host, heartbeat, host_ttl,
// report_jobs, host_jobs, job_spec) are defined in sql/; their parameters and
// result columns are the contract.
//
// Only the agent's thread (agent.h), which owns the connection, calls these.
// Each takes the caller's transaction and never commits it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "core/model/report.h"
#include "core/model/states.h"
#include "hostd/agent/host_config.h"
#include "hostd/agent/usage.h"

namespace pgfleet::hostd::store {

// Prepares every statement below on conn.
void Prepare(pqxx::connection& conn);

// Registers (or re-registers) the host; returns its new generation.
int64_t RegisterHost(pqxx::transaction_base& tx, const HostConfig& config);

// pgfleet.report_rootfs_warm: the root filesystems the host ran recently,
// newest first (Supervisor::RecentRootfs).
void ReportRootfsWarm(pqxx::transaction_base& tx, const std::string& host, int64_t generation,
                      const std::vector<std::string>& names);

// pgfleet.host_ttl(): how long schedulers let a host go without a heartbeat.
std::chrono::milliseconds HostTtl(pqxx::transaction_base& tx);

// The host as the database sees it after a heartbeat.
struct HostStatus {
  std::string state;  // for logs only
  bool lost = false;  // declared lost: our attempts may have been superseded
  int64_t generation = 0;
  // A digest of the host's live attempts as the database sees them (pgfleet.heartbeat),
  // and how many of them it asks to stop: hostd reconciles when they differ
  // from what it runs.
  std::string live_digest;
  int stops = 0;
};
// Records a heartbeat of this generation; nullopt when the host is not in
// pgfleet.hosts any more.
// condition: why the host takes no new work ("" when it does); usage: the
// live usage of its running attempts (usage.h), or nullptr when this
// heartbeat carries none.
std::optional<HostStatus> Heartbeat(pqxx::transaction_base& tx, const std::string& host,
                                    int64_t generation, int running_jobs,
                                    const std::string& condition,
                                    const std::vector<UsageReading>* usage = nullptr);

// The database's verdict on one report.
struct ReportResult {
  int64_t job = 0;
  int attempt = 0;
  std::optional<model::ReportKind> kind;  // nullopt: a kind this hostd does not know
  bool accepted = false;
  std::string uid;  // the uid the report named (the attempt's job as the host knew it)
  // An accepted running report of a first attempt: seconds from the job's
  // insert to now on the database's clock; -1 otherwise.
  double since_insert = -1;
};
// The database's verdicts on a batch, one per report in its order, and
// whether the batch freed resources while a scheduler sleeps (then
// WakeSchedulers once it has committed).
struct ReportBatchResult {
  std::vector<ReportResult> reports;
  bool wake_schedulers = false;
};
// The address of an attempt's job (network "bridge"), "" when none: a
// running report carries it as "address" (pgfleet.reported_address).
using AddressOf = std::function<std::string(int64_t job, int attempt)>;
// Sends a batch of reports (model::ToJson each, in order) to pgfleet.report_jobs,
// which wakes no scheduler itself: see WakeSchedulers.
ReportBatchResult ReportJobs(pqxx::transaction_base& tx, const std::string& host,
                             int64_t generation, const std::vector<model::Report>& reports,
                             const AddressOf& address_of = {});
// pgfleet.wake_schedulers for every formation: after a report batch that
// freed resources while a scheduler sleeps has committed, in a transaction of
// its own, never in the report's (docs/decisions/0004).
void WakeSchedulers(pqxx::transaction_base& tx);

// One job the database says this host runs (assigned or running).
struct HostJob {
  int64_t job = 0;
  int attempt = 0;
  std::optional<model::JobState> state;  // nullopt: a state this hostd does not know
  std::string state_name;                // as the database wrote it, for logs
  bool stop_wanted = false;              // desired_state = 'stop'
  bool stop_force = false;               // pgfleet.force_stop: kill it now, no grace
  std::string spec_json;                 // pgfleet.job_spec_json(job); "" unless assigned
  std::string uid;                       // jobs.uid, "" for jobs from before it
};
std::vector<HostJob> AssignedJobs(pqxx::transaction_base& tx, const std::string& host);

}  // namespace pgfleet::hostd::store
