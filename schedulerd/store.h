#pragma once
// schedulerd's store: every statement the scheduler runs (store.sql,
// store_maintenance.sql), named, prepared once per connection (Prepare,
// installed with ReconnectingConnection::SetOnConnect), behind typed
// functions that read result columns by name into plain structs.
//
// What must hold:
// - Prepare(conn) ran on the connection a transaction belongs to before any
//   other function here is called with that transaction.
// - No function here commits: the caller owns the transaction and decides its
//   scope (the formation pass runs claim, snapshot and assign in one
//   transaction that holds the formation's advisory lock, and the pending
//   reasons in a statement of their own after it commits).
// - No wait for a lock once a pass holds hosts: LockHosts and AssignJobs skip
//   rows another transaction holds instead of waiting (so a pass is never
//   in a deadlock, whatever order others lock jobs and hosts in: reports lock
//   jobs, then their host). LiveReplicas, which waits for job rows, runs
//   before LockHosts. ReadPending locks nothing (the formation's advisory
//   lock keeps other schedulers out).
// Only schedulerd/ calls this module; SQL text appears nowhere else in schedulerd.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/placement/limits.h"
#include "core/placement/placement.h"
#include "core/placement/reconcile.h"

namespace pgfleet::schedulerd::store {

// Prepares the statements below on the scheduler loop's work connection:
// all but those that record a dispatch's outcome.
void Prepare(pqxx::connection& conn);
// Prepares those (DispatchSucceeded, DispatchFailed, DispatchUnanswered), for
// the dispatcher's own connection.
void PrepareDispatchOutcomes(pqxx::connection& conn);

// The LISTEN connection's statements (the idle lock, the next retry).
void PrepareListen(pqxx::connection& conn);
// lock_timeout for this session ("250ms"; "0" = wait forever).
void SetLockTimeout(pqxx::transaction_base& tx, const std::string& value);
// The idle lock (model::kIdleLockKey), exclusively: waits up to the
// session's lock_timeout, then throws lock_not_available (55P03).
void TakeIdleLock(pqxx::transaction_base& tx);
void ReleaseIdleLock(pqxx::transaction_base& tx);
// Seconds until the earliest backoff ends (pgfleet.next_retry_in); nullopt
// when no job waits for one.
std::optional<double> NextRetryIn(pqxx::transaction_base& tx);

// --- the formation pass ---------------------------------------------------

struct Formation {
  int id = 0;
  std::string name;
};

// Formations with placeable pending jobs, highest waiting priority first, then
// service formations whose replicas differ from what is wanted (count, or
// replicas on draining/offline hosts to move), system formations and
// sysbatch formations not marked done, cron formations whose next due time
// has come. With all == false only the
// formations in `ids` are considered. Their ids.
std::vector<int> FormationsToWork(pqxx::transaction_base& tx, bool all, const std::set<int>& ids);

struct FormationShape {
  bool is_service = false;
  int replicas = 0;
  std::string name;
  std::string spread;  // formations.spread ("": pack)
  bool is_system = false;
  bool is_sysbatch = false;
  bool done = false;  // a sysbatch formation marked done (formations.done_at)
  bool rolling_out = false;  // a rollout of a new version is in progress
  int max_running = 0;       // formations.max_running (0: unlimited)
  bool quotas = false;       // some owner has a quota (pgfleet.owner_quotas)
  bool is_cron = false;
  bool cron_due = false;  // a cron formation whose next_due_at has come
};
struct FormationLock {
  bool exists = false;                  // the formation's row was found
  std::optional<FormationShape> shape;  // set when this transaction holds its lock
};
// pg_try_advisory_xact_lock on the formation and its shape, in one round
// trip: no shape when another scheduler holds the lock or the formation is gone.
FormationLock LockFormation(pqxx::transaction_base& tx, int formation_id);

struct PendingJob {
  placement::JobRequest request;
  std::string reason;  // jobs.error as claimed: why it waited last ("" if never said)
  std::string owner;   // jobs.owner
};
// Up to `limit` placeable pending jobs of the formation, in priority order,
// read without a lock (AssignJobs locks those it assigns).
std::vector<PendingJob> ReadPending(pqxx::transaction_base& tx, const std::string& formation,
                                    int limit);

// A formation's jobs assigned or running (for its max_running), read under
// its lock.
int FormationLive(pqxx::transaction_base& tx, const std::string& formation);
// The quotas of those of `owners` that have one, with their usage now.
std::map<std::string, placement::OwnerQuota> OwnerQuotas(pqxx::transaction_base& tx,
                                                         const std::vector<std::string>& owners);

struct SnapshotHost {
  placement::HostView view;
  std::string api_url;
  std::string ticket_key;  // pgfleet.host_keys, hex ("" if the host registered none)
  int suspensions = 0;     // hosts.suspensions: failed dispatches since its last success
};
// What a scheduler keeps of a host between passes, read again only when the
// host's config_version moves (labels, API URL, driver, ticket key, the
// root filesystems it ran recently).
struct HostConfig {
  int64_t version = 0;
  std::map<std::string, std::string> labels;
  std::string api_url;
  bool isolates = true;
  std::string ticket_key;
  std::set<std::string> rootfs_warm;  // pgfleet.host_rootfs
};
using HostConfigs = std::unordered_map<std::string, HostConfig>;  // by host id
// Feasible hosts: up, heartbeat fresh by the database clock, not suspended.
// Reads what *configs lacks or has at an older version, and leaves in it
// only the hosts returned.
std::vector<SnapshotHost> LoadHostSnapshot(pqxx::transaction_base& tx, HostConfigs* configs);

struct LockedHost {
  int cpu = 0, memory = 0;                      // totals
  int cpu_allocated = 0, memory_allocated = 0;  // as locked
};
// Locks, until the transaction ends, the hosts of `ids` still up and not
// suspended, skipping those another transaction holds (another scheduler's
// pass, a report, an operator): those locked, as locked, by id. A pass
// plans on hosts it holds alone, so schedulers placing at once never plan
// onto the same room, and nothing changes a held host's room before the
// pass commits. It never waits (docs/decisions/0013).
std::map<std::string, LockedHost> LockHosts(pqxx::transaction_base& tx,
                                            const std::vector<std::string>& ids);

struct Assignment {
  int64_t job_id = 0;
  int attempt = 0;
  std::string host_id;
  std::string spec;  // pgfleet.job_spec_json(j) as text (valid UTF-8): what hostd is sent
  std::string uid;   // jobs.uid ("" for jobs from before it existed)
  double since_insert = -1;  // seconds from insert to this assignment (attempt 1), else -1
};
// pgfleet.assign_jobs: locks the planned jobs still pending (skipping any
// another transaction holds), charges each host conditionally; returns the
// placements that held (a host that filled up meanwhile takes none).
std::vector<Assignment> AssignJobs(pqxx::transaction_base& tx,
                                   const std::vector<placement::Placement>& plan);

// Where the formation's assigned and running jobs are (host id -> count):
// where its spread starts from.
placement::HostCounts FormationHostCounts(pqxx::transaction_base& tx, const std::string& formation);

// Records why each job is still pending (job id -> reason).
void SetPendingReasons(pqxx::transaction_base& tx, const std::map<int64_t, std::string>& reasons);

// --- service formations ---------------------------------------------------

// Locks and returns the formation's live replicas (pending, assigned or
// running with desired_state 'run').
std::vector<placement::ReplicaView> LiveReplicas(pqxx::transaction_base& tx,
                                                 const std::string& formation);
// A system formation: the hosts it has one replica on (pgfleet.system_hosts).
std::vector<std::string> SystemHosts(pqxx::transaction_base& tx, int formation_id);
// pgfleet.create_system_replicas: one replica pinned to each of `hosts`.
int CreateSystemReplicas(pqxx::transaction_base& tx, int formation_id,
                         const std::vector<std::string>& hosts);
// A sysbatch formation's jobs since it was (re)created, in every state, by
// the host each is pinned to.
std::vector<placement::SysbatchJobView> SysbatchJobs(pqxx::transaction_base& tx, int formation_id);
// pgfleet.insert_replicas of kind sysbatch: one job pinned to each of
// `hosts` (none once the formation is done).
int CreateSysbatchJobs(pqxx::transaction_base& tx, int formation_id,
                       const std::vector<std::string>& hosts);
// pgfleet.cron_tick: a cron formation's jobs for the due times that have
// come (its overlap and catch_up rules), then its next due time. How many
// jobs it made.
int CronTick(pqxx::transaction_base& tx, int formation_id);
// Inserts `count` new replicas from the formation's whole job template
// (pgfleet.create_replicas); returns how many were made.
int CreateReplicas(pqxx::transaction_base& tx, int formation_id, int count);
// pgfleet.stop_jobs: asks for the jobs to stop, with the reason recorded.
void StopJobs(pqxx::transaction_base& tx, const std::vector<int64_t>& job_ids,
              const std::string& reason);

// --- after commit ---------------------------------------------------------

struct DispatchedJob {
  int64_t job_id = 0;
  int attempt = 0;
};
// These hosts took their batches: clears their dispatch-failure suspensions.
void DispatchSucceeded(pqxx::transaction_base& tx, const std::vector<std::string>& host_ids);
// The host did not: its jobs go back to pending and the host is suspended.
// Returns how many jobs went back.
int DispatchFailed(pqxx::transaction_base& tx, const std::string& host_id,
                   const std::vector<DispatchedJob>& jobs, const std::string& error);
// The host may have taken its batch but did not answer: the jobs stay
// assigned (hostd's reconcile starts any that did not arrive) and the host is
// suspended.
void DispatchUnanswered(pqxx::transaction_base& tx, const std::string& host_id);

struct StopToForward {
  int64_t job_id = 0;
  int attempt = 0;
  std::string host_id;
  std::string api_url;
  std::string ticket_key;  // the host's, to sign the stop ticket with
  bool force = false;      // pgfleet.force_stop: kill at once
};
// Assigned or running jobs whose desired state is stop.
std::vector<StopToForward> StopsToForward(pqxx::transaction_base& tx);

// Why the formation's pass keeps failing, on its row (formations.pass_error,
// pass_failures); cleared once a pass works.
void RecordPassError(pqxx::transaction_base& tx, int formation, const std::string& error,
                     int failures);
void ClearPassError(pqxx::transaction_base& tx, int formation);

// --- rollouts ----------------------------------------------------------------
// (schedulerd/store_rollout.cpp, its statements store_rollout.sql; each inside
// a formation's pass, holding its lock)

struct ActiveRollout {
  int64_t id = 0;
  int to_version = 0;
  std::string state;  // pgfleet.rollouts.state
  int canary = 0;
  bool promoted = false;
  std::string max_parallel;  // formations.max_parallel, unresolved ("2", "25%")
  int healthy = 0;           // as last recorded
  bool past_deadline = false;
  std::string progress_deadline;  // formations.progress_deadline, as text
  int stopping = 0;               // the formation's replicas being stopped that still hold a place
};
void PrepareRollout(pqxx::connection& conn);
std::optional<ActiveRollout> ReadActiveRollout(pqxx::transaction_base& tx, int formation_id);
// pgfleet.rollout_progress (written only when something changed).
void RecordRolloutProgress(pqxx::transaction_base& tx, int64_t rollout, const std::string& state,
                           int updated, int healthy, const std::string& message);
void FinishRollout(pqxx::transaction_base& tx, int64_t rollout, int updated, int healthy);
// pgfleet.fail_rollout: the version auto_revert went back to, if it did.
std::optional<int> FailRollout(pqxx::transaction_base& tx, int64_t rollout, const std::string& why);

// --- maintenance ----------------------------------------------------------
// (schedulerd/store_maintenance.cpp, its statements store_maintenance.sql)

// Prepares the statements below; Prepare calls it.
void PrepareMaintenance(pqxx::connection& conn);

// metrics_url: its /health and /metrics ("" = unknown, stored as null).
void Heartbeat(pqxx::transaction_base& tx, const std::string& scheduler_id,
               const std::string& hostname, int pid, const std::string& metrics_url);
// pgfleet.host_ttl() in seconds.
double HostTtlSeconds(pqxx::transaction_base& tx);

// The cluster's gauges for /metrics: live jobs by state, hosts by state,
// the age in seconds of the oldest job ready to place.
struct ClusterGauges {
  std::map<std::string, double> jobs;   // pending, assigned, running -> count
  std::map<std::string, double> hosts;  // up, draining, offline, lost -> count
  double oldest_pending_seconds = 0;
};
ClusterGauges ReadClusterGauges(pqxx::transaction_base& tx);

struct LostHost {
  std::string host_id;
  int requeued = 0;
};
// Marks hosts silent for longer than ttl_seconds lost and requeues their attempts.
std::vector<LostHost> SweepLostHosts(pqxx::transaction_base& tx, double ttl_seconds);
// What the sweep's guard decided (pgfleet.host_loss_guard).
struct LossGuard {
  bool held = false;         // a mass loss is held: no silent host is declared lost
  int held_hosts = 0;        // silent hosts it holds
  int of_hosts = 0;          // hosts not lost when it was judged
  int waiting_for_rate = 0;  // silent hosts waiting for the loss rate limit
};
LossGuard ReadLossGuard(pqxx::transaction_base& tx);
// Formations whose scheduling lock a session that is not a scheduler's has
// held for longer than grace_seconds: their pending jobs' error says who
// holds it (pgfleet.note_foreign_formation_locks). Returns how many.
int NoteForeignFormationLocks(pqxx::transaction_base& tx, double grace_seconds);
// Stops and requeues jobs on draining hosts past their deadline; returns how many.
int EvictOverdueDrains(pqxx::transaction_base& tx);
// Releases or fails the jobs waiting for others (jobs.after) that an exit
// path left waiting (pgfleet.settle_all_dependents); returns how many. One
// probe of an empty table when no job waits.
int SettleDependencies(pqxx::transaction_base& tx);

// The transaction-scoped lock that lets one scheduler at a time prune.
bool TryLockPrune(pqxx::transaction_base& tx);
// Deletes up to `limit` finished jobs older than retain_seconds; returns how many.
int PruneFinished(pqxx::transaction_base& tx, double retain_seconds, int limit);
// Forgets schedulers silent for a day and the rows of deleted formations
// whose last job was pruned.
void ForgetRetired(pqxx::transaction_base& tx);

}  // namespace pgfleet::schedulerd::store
