#pragma once
// Facts the database and the daemons must agree on, defined once on the C++
// side. Where SQL needs the same fact it has a function returning it
// (pgfleet.lock_class(), pgfleet.work_channel(), ...) or a setting, and
// tests/integration checks that both sides agree.

namespace pgfleet::model {

// Class (first key) of every pgfleet advisory lock, two-integer form, so our
// locks never collide with other applications' (hashed 32-bit keys do).
// SQL: pgfleet.lock_class(). 'pgft'.
inline constexpr int kLockClass = 0x70676674;
// Second key of the lock serializing `pgfleet migrate` (formation ids are > 0).
inline constexpr int kMigrateLockKey = -1;
// Second key of the lock that lets one scheduler at a time prune old jobs.
inline constexpr int kPruneLockKey = -2;
// Second key of the idle-schedulers lock. A scheduler about to sleep holds it
// exclusively (session level); whatever would wake the schedulers (a job
// insert, freed capacity) takes it shared for its transaction when it can,
// and only NOTIFYs when it cannot, i.e. when some scheduler sleeps
// (docs/decisions/0004). A scheduler that gets the lock knows every silent
// transaction before it has committed: it looks at everything once, then
// sleeps until notified.
// SQL: pgfleet.idle_lock_key(), pgfleet.wake_schedulers().
inline constexpr int kIdleLockKey = -3;

// Channel the jobs trigger NOTIFYs; payload is a formation id, or
// kAllFormations when capacity was freed and every formation with pending
// jobs should be retried. SQL: pgfleet.work_channel(), pgfleet.all_formations().
inline constexpr const char* kWorkChannel = "pgfleet_work";
// NOTIFY channel on which a watched job's id is sent when it changes (pgfleet
// wait). SQL: pgfleet.job_channel(), pgfleet.watch_jobs().
inline constexpr const char* kJobChannel = "pgfleet_job";
// NOTIFY channel on which a formation's name is sent when its endpoints
// change, while some session watches them (pgfleet endpoints --watch). SQL:
// pgfleet.endpoints_channel(), pgfleet.watch_endpoints().
inline constexpr const char* kEndpointsChannel = "pgfleet_endpoints";
inline constexpr const char* kAllFormations = "*";

// A host silent for this long (by the database clock) is lost, unless the
// setting host_ttl_seconds in pgfleet.settings says otherwise.
// SQL: the default of pgfleet.host_ttl().
inline constexpr int kDefaultHostTtlSeconds = 10;

// A job whose attempts were lost with this many hosts fails (it may be what
// kills them). SQL: pgfleet.host_loss_limit().
inline constexpr int kHostLossLimit = 3;

// A formation's planned jobs that assign_jobs left out (held by another
// transaction, cancelled meanwhile) are re-planned against a fresh snapshot
// at most this many times per transaction (scheduler-only; no SQL
// counterpart).
inline constexpr int kReplanRounds = 3;
// How many times a pass plans again after finding hosts of its plan held by
// another transaction (schedulerd's FormationPass::PlanOnHeldHosts); jobs
// still planned onto such hosts after that wait for the next pass
// (docs/decisions/0013).
inline constexpr int kHoldRounds = 4;
// A pass's first plan for at most this many claimed jobs is assigned without
// locking its hosts first (a lone job's start is one round trip shorter); a
// job it leaves out is planned again with them locked.
inline constexpr int kPlanWithoutLocksUpTo = 8;

// Why a job waits (jobs.error) is written for the first this many jobs a
// formation's pass claims, in placement order; behind them only when the job
// can never fit, or already shows another reason (scheduler-only;
// docs/decisions/0015).
inline constexpr int kReasonHead = 32;

// Size limits of a job spec, so every job fits a dispatch (hostd accepts
// bodies up to 1 MiB) and no row is a denial of service. The database
// refuses them at insert (pgfleet.spec_problem) and hostd again.
// SQL: pgfleet.max_command_args(), max_command_bytes(), max_env_bytes(),
// max_constraints_bytes(), max_path_bytes().
inline constexpr int kMaxCommandArgs = 1000;
inline constexpr int kMaxCommandBytes = 128 * 1024;     // all arguments together
inline constexpr int kMaxEnvBytes = 64 * 1024;          // names and values together
inline constexpr int kMaxConstraintsBytes = 16 * 1024;  // labels and values together
inline constexpr int kMaxPathBytes = 4096;              // rootfs, user
// The largest uid or gid a job's user may name (SQL pgfleet.max_job_user_id()):
// a number past it would wrap to another id (2^32 is uid 0) on the host.
inline constexpr long long kMaxJobUserId = 2147483647;
// Ids of an unprivileged job's user namespace (the container driver maps
// them onto hostd's --job-ids range, which has at least this many): its
// run_as names ids below it (SQL pgfleet.job_namespace_ids()).
inline constexpr long long kJobNamespaceIds = 65536;
// A job's disk, MiB (SQL domain pgfleet.spec_disk); 0 = no limit.
inline constexpr int kMaxDiskMib = 16777216;

}  // namespace pgfleet::model
