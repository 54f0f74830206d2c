#pragma once
// hostd's link to the database: registration, heartbeats, batched job
// reports, and the periodic reconcile against the jobs the database says this
// host runs. Hosts never LISTEN. The real hostd runs one agent with Run(), on
// one thread that owns its connection; hollow hosts (hollow.h) drive many
// agents over a few shared connections with Step() and WatchdogTick().
//
// Outages: while the database is unreachable, jobs keep running and reports
// queue up in memory (in order); on reconnect hostd delivers them, then
// reconciles in full. A second thread, the fence watchdog
// (fence/watchdog.h), kills every job of the host once no heartbeat has
// succeeded for (almost) the host TTL, the time after which schedulers may
// declare the host lost and run its jobs elsewhere (docs/failures-hostd.md).
// The SQL it runs is in store.h, prepared on every new connection.
//
// Thread domains, a class each: the agent's own thread (Run, or a hollow
// runner's Step: everything below but what follows); any thread (Enqueue,
// Wake: the ReportQueue); the watchdog's thread (WatchdogTick: the
// FenceWatchdog).

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "core/db/connection.h"
#include "core/model/report.h"
#include "core/net/http.h"
#include "core/util/mutex.h"
#include "hostd/agent/host_config.h"
#include "hostd/agent/report_queue.h"
#include "hostd/agent/store.h"
#include "hostd/agent/usage.h"
#include "hostd/fence/watchdog.h"
#include "hostd/supervisor/supervisor.h"

namespace pgfleet::hostd {

class Agent {
 public:
  using Clock = std::chrono::steady_clock;
  // config.data_dir empty: no lease file (hollow hosts).
  Agent(HostConfig config, metrics::Registry& metrics);
  void SetSupervisor(Supervisor* supervisor);
  const HostConfig& Config() const { return config_; }
  // Queues a report for the next batch (thread-safe; never blocks on the database).
  void Enqueue(model::Report report);
  // Runs until *stop, then leaves: calls begin_leaving (e.g. to stop taking
  // API requests), flushes the reports still queued and heartbeats once more
  // at once, so a quick restart gets the whole fence time; then calls
  // finish_leaving (e.g. to wait for the API's last requests, which may
  // still queue reports) and flushes what they queued. Nothing is flushed if
  // the database is down.
  void Run(const std::atomic<bool>& stop, const std::function<void()>& begin_leaving = {},
           const std::function<void()>& finish_leaving = {});
  // Asks for a reconcile soon (e.g. after a dispatch).
  void Wake();

  // For a runner of many agents (hollow.h). Only one thread at a time calls
  // Step, NoteReconnected, NoteStepFailed and FinalFlush of one agent (the
  // thread owning `conn`); another calls WatchdogTick.
  //
  // Called (besides waking Run) whenever the agent has work: set before the start.
  void SetWaker(std::function<void()> waker) { reports_.SetWaker(std::move(waker)); }
  // Starts the lease clock and the fence timing; Run does it first.
  void BeginLease();
  // Does on conn whatever is due: register, deliver queued reports, heartbeat,
  // reconcile. Returns when it next wants a step. Throws what the database
  // throws; a database that does not answer within DbDeadline() (a stopped
  // backend) breaks the connection (core/db/deadline.h).
  Clock::time_point Step(pqxx::connection& conn);
  // True (once) when Enqueue or Wake asked for a step since the last call.
  bool TakeWake() { return reports_.TakeWake(); }
  // The connection was reopened: the next step reconciles in full.
  void NoteReconnected() { force_reconcile_ = true; }
  // A step failed (or the database was unreachable: e == nullptr). Logs once
  // per distinct error and counts it.
  void NoteStepFailed(const std::exception* e);
  // The fence watchdog's check (Run calls it every 100 ms): fences every job
  // once no heartbeat succeeded for (almost) the host TTL, unfences after.
  void WatchdogTick() { watchdog_.Tick(); }
  // Delivers what is still queued (at exit). With a lease file, also
  // heartbeats once more: a deliberate stop then gives a restarted hostd the
  // whole fence time (lease.h) before the shims fence their jobs.
  void FinalFlush(pqxx::connection& conn);
  // How long one unit of database work may wait for an answer: a third of
  // the host TTL, within [kMinDbDeadline, kMaxDbDeadline].
  std::chrono::milliseconds DbDeadline() const;
  static constexpr std::chrono::milliseconds kMinDbDeadline{2000};
  static constexpr std::chrono::milliseconds kMaxDbDeadline{20000};
  // With nothing to do by the heartbeats' answers, a reconcile still runs
  // every this many --reconcile-interval (a minute by default): a safety net.
  static constexpr int kReconcileSafetyFactor = 12;

 private:
  void Register(pqxx::connection& conn);
  void Heartbeat(pqxx::connection& conn);
  // Writes the supervisor's RecentRootfs when its names differ from those
  // last written in this registration (one statement then, none otherwise).
  void ReportRootfsIfChanged(pqxx::connection& conn);
  // What stops this host from taking new work now ("" when nothing does):
  // disk pressure, the data directory's filesystem at or above
  // --disk-full-percent. Logged when it starts and when it clears.
  std::string Condition();
  // Heartbeats if an interval has passed since the last one. Called between
  // every other piece of database work (report batches, reconcile starts), so
  // no amount of it delays a heartbeat by more than one piece.
  void HeartbeatIfDue(pqxx::connection& conn);
  // Delivers one batch of queued reports (false if none was queued).
  bool Flush(pqxx::connection& conn);
  // Applies batch[begin, end) in one transaction; if the database refuses it
  // for what a report carries, halves it until the bad report is alone and
  // quarantines that one. *settled: how many reports are done with, in order.
  void Deliver(pqxx::connection& conn, std::vector<model::Report>& batch, size_t begin, size_t end,
               size_t* settled);
  // Acts on the database's verdicts; notes (wake_schedulers_) when the batch
  // freed resources while a scheduler sleeps.
  void NoteResults(const store::ReportBatchResult& results);
  // The supervisor's addresses of attempts, for running reports (none
  // before SetSupervisor).
  store::AddressOf AddressOf() const;
  // Wakes sleeping schedulers if reports freed resources while one slept,
  // since the last wake (a statement of its own, after the reports' commit).
  void WakeSchedulersIfFreed(pqxx::connection& conn);
  // Sets a report the database refuses aside (logged, counted), to be
  // retried alone on every reconcile until it goes through.
  void Quarantine(model::Report report, const std::string& error);
  void RetryQuarantined(pqxx::connection& conn);
  void Reconcile(pqxx::connection& conn);
  // Whether a reconcile would find anything to do, by the latest heartbeat's
  // answer: the database's live attempts for this host differ from the ones
  // it runs (the digest pgfleet.heartbeat returns), or some are asked to stop.
  bool ViewDiffers() const;
  // The reconcile's decision for one job the database assigns to this host.
  void ReconcileJob(const store::HostJob& job);
  // The host TTL the database judges this host by: the watchdog's, and the shims' fence.
  void SetTtl(std::chrono::milliseconds ttl);

  HostConfig config_;
  metrics::Registry& metrics_;
  Supervisor* supervisor_ = nullptr;
  // The agent's thread alone uses these (Run and what it calls):
  db::ReconnectingConnection conn_;
  int64_t generation_ = 0;
  bool registered_ = false;
  std::chrono::steady_clock::time_point last_heartbeat_{};
  std::chrono::steady_clock::time_point last_reconcile_{};
  bool force_reconcile_ = false;  // a reconcile is due whatever the interval
  // The latest heartbeat's view of this host's live attempts ("" before one).
  std::string db_live_digest_;
  int db_stops_ = 0;
  std::string last_error_;                // logged once until a step succeeds again
  bool disk_pressure_ = false;            // as of the latest heartbeat
  // The warm rootfs names last written, sorted; nullopt: none yet this registration.
  std::optional<std::vector<std::string>> rootfs_written_;
  std::deque<model::Report> quarantine_;  // reports the database refused (Quarantine)
  bool ttl_warned_ = false;
  UsageSampler usage_;              // live usage, sent with heartbeats
  Clock::time_point last_usage_{};  // when it last was
  // Reports freed resources while a scheduler sleeps, no wake sent yet.
  bool wake_schedulers_ = false;

  ReportQueue reports_;     // any thread
  FenceWatchdog watchdog_;  // the watchdog's thread (and NoteContact from this one)
};

}  // namespace pgfleet::hostd
