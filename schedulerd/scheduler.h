#pragma once
// pgfleet-schedulerd's loop: wake on NOTIFY pgfleet_work or on the timer, work
// every formation whose advisory lock it gets, dispatch after commit.
//
//   NOTIFY / timer -> dirty formations -> store::FormationsToWork (skipped
//     when one formation is named: it goes straight to its pass)
//     -> FormationPass per formation (one transaction each, formation_pass.h)
//     -> Dispatcher: assignments handed to its threads, stop requests sent
//        (dispatch.h)
//   and on their own clocks: Maintenance (heartbeat, lost hosts, pruning).
//
// What must hold: the loop owns two connections — one that LISTENs, one that
// works (its statements prepared by store::Prepare on every reconnect); the
// dispatcher has a third, for the outcomes of its deliveries. A lost
// connection or NOTIFY only delays work: after a reconnect, and on every tick,
// every formation is looked at again. Only main() creates a Scheduler; Run
// blocks its thread.
//
// Sleeping: a scheduler with nothing to do takes the idle lock (see
// model::kIdleLockKey) on its listen connection, looks at every formation once
// (transactions that skipped their NOTIFY have committed by then), and sleeps
// until a NOTIFY, which wakers send only while some scheduler holds that lock.
// Woken, it keeps the lock through that pass (every waker meanwhile still
// notifies, so nothing is missed) and gives it back only when the pass leaves
// work waiting (docs/decisions/0004).

#include <atomic>
#include <chrono>
#include <memory>
#include <pqxx/pqxx>
#include <set>
#include <string>

#include "core/db/connection.h"
#include "core/metrics/metrics.h"
#include "schedulerd/dispatch.h"
#include "schedulerd/formation_backoff.h"
#include "schedulerd/formation_pass.h"
#include "schedulerd/maintenance.h"

namespace pgfleet::schedulerd {

struct Config {
  std::string dsn;
  std::string id;                        // row in pgfleet.schedulers
  std::string token;                     // cluster token for hostd's API
  std::chrono::milliseconds tick{1000};  // safety-net timer
  int batch_size = 500;                  // pending jobs claimed per formation per transaction
  int dispatch_timeout_seconds = 3;
  // Hosts silent longer than this are lost (<= 0: pgfleet.settings host_ttl_seconds).
  double host_ttl_seconds = 0;
  std::chrono::seconds retain{7 * 24 * 3600};  // finished jobs older than this are pruned
  std::chrono::seconds prune_interval{60};
  std::string metrics_url;  // "http://<listen address>", recorded in pgfleet.schedulers
};

class Scheduler {
 public:
  // metrics must outlive the scheduler.
  Scheduler(Config config, metrics::Registry& metrics);
  ~Scheduler();
  // Runs until *stop becomes true.
  void Run(const std::atomic<bool>& stop);

 private:
  class Receiver;
  // Name the connections in a deadline's log line.
  std::string WorkWho() const { return "scheduler=" + config_.id + " work connection"; }
  std::string ListenWho() const { return "scheduler=" + config_.id + " listen connection"; }

  void Listen(pqxx::connection& conn);
  // Heartbeat, sweep and prune when their time has come.
  void Maintain(pqxx::connection& conn, std::chrono::steady_clock::time_point now);
  // Waits for a NOTIFY or the next tick; false when there is nothing to do yet.
  // Sleeps holding the idle lock (model::kIdleLockKey) when it can get it.
  bool WaitForWork(pqxx::connection& listen, std::chrono::steady_clock::time_point now);
  // How long until the earliest retry backoff of a pending job ends (max: none waits).
  std::chrono::microseconds UntilNextRetry(pqxx::connection& conn);
  // Sleeping without the idle lock: another scheduler sleeps with it (its
  // notifications wake this one too) or wakers that sent no NOTIFY are still
  // in flight. Waits a short, growing while, then looks at everything.
  bool PollForWork(pqxx::connection& listen, std::chrono::microseconds until_tick);
  // Takes or gives back the idle lock on the listen connection.
  bool TryIdleLock(pqxx::connection& listen);
  void ReleaseIdleLock(pqxx::connection& listen);
  // Works the dirty formations, then dispatches what committed; true when it
  // assigned anything.
  bool WorkDirty(pqxx::connection& conn, const std::atomic<bool>& stop);
  // After a failed pass: drops connections that closed.
  void AfterError(pqxx::connection* lc, pqxx::connection* wc);

  Config config_;
  metrics::Registry& metrics_;
  FormationPass formation_pass_;
  Dispatcher dispatcher_;
  Maintenance maintenance_;
  db::ReconnectingConnection listen_conn_;
  db::ReconnectingConnection work_conn_;
  std::unique_ptr<Receiver> receiver_;
  std::set<int> dirty_;
  FormationBackoff backoff_;  // formations whose pass keeps failing
  bool all_dirty_ = true;
  bool holds_idle_lock_ = false;       // on listen_conn_'s current session
  std::chrono::milliseconds poll_{0};  // PollForWork's next wait
  std::chrono::steady_clock::time_point last_heartbeat_{};
  std::chrono::steady_clock::time_point last_full_pass_{};
  std::chrono::steady_clock::time_point last_prune_{};
};

}  // namespace pgfleet::schedulerd
