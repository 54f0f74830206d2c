#include "schedulerd/scheduler.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "core/db/sql_state.h"
#include "core/model/constants.h"
#include "schedulerd/store.h"

namespace pgfleet::schedulerd {

using Clock = std::chrono::steady_clock;

namespace {

// How often this scheduler's row in pgfleet.schedulers is refreshed.
constexpr auto kHeartbeatInterval = std::chrono::seconds(2);
// Pause before retrying after the database is unreachable or a pass failed.
constexpr auto kRetryPause = std::chrono::milliseconds(200);
// PollForWork's first wait; it doubles up to the tick while nothing turns up.
constexpr auto kFirstPoll = std::chrono::milliseconds(5);
// How long a scheduler waits for the idle lock before it polls instead.
constexpr auto kIdleLockWait = std::chrono::milliseconds(50);
// A wait for the tick may end up to a millisecond early: a tick due within
// this much is done now, not after one more query and a sub-millisecond wait.
constexpr auto kTickSlack = std::chrono::milliseconds(2);

}  // namespace

// Marks formations dirty from NOTIFY payloads (a formation id, or all).
class Scheduler::Receiver : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& conn, Scheduler* owner)
      : pqxx::notification_receiver(conn, model::kWorkChannel), owner_(owner) {}
  void operator()(const std::string& payload, int) override {
    if (payload == model::kAllFormations) {
      owner_->all_dirty_ = true;
      return;
    }
    try {
      owner_->dirty_.insert(std::stoi(payload));
    } catch (const std::exception&) {
      owner_->all_dirty_ = true;  // unknown payload: be safe, look at everything
    }
  }

 private:
  Scheduler* owner_;
};

Scheduler::Scheduler(Config config, metrics::Registry& metrics)
    : config_(std::move(config)),
      metrics_(metrics),
      formation_pass_(config_.batch_size, metrics),
      dispatcher_(config_.dsn, config_.token, config_.dispatch_timeout_seconds, metrics,
                  "scheduler=" + config_.id),
      maintenance_({config_.id, config_.host_ttl_seconds, config_.retain, config_.metrics_url},
                   metrics),
      listen_conn_(config_.dsn, "listen connection"),
      work_conn_(config_.dsn, "work connection") {
  work_conn_.SetOnConnect(store::Prepare);
  listen_conn_.SetOnConnect(store::PrepareListen);
  // Counters a dashboard graphs are exported from the start, at 0, not
  // only once the first event happens (a rate over a missing series is no
  // data, not zero).
  for (const char* name :
       {"pgfleet_scheduler_jobs_assigned_total", "pgfleet_scheduler_dispatches_total",
        "pgfleet_scheduler_dispatch_failures_total",
        "pgfleet_scheduler_dispatches_unanswered_total", "pgfleet_scheduler_hosts_lost_total",
        "pgfleet_scheduler_jobs_lost_total", "pgfleet_scheduler_errors_total"}) {
    metrics_.Add(name, 0);
  }
}

Scheduler::~Scheduler() {
  if (receiver_ && listen_conn_.IsOpen()) {
    db::Deadline deadline(*listen_conn_.Get(), kDbDeadline, ListenWho());  // UNLISTEN
    receiver_.reset();
  }
  receiver_.reset();
}

void Scheduler::Listen(pqxx::connection& conn) {
  receiver_.reset();
  receiver_ = std::make_unique<Receiver>(conn, this);
  all_dirty_ = true;         // notifications sent while we were away are gone: full reconcile
  holds_idle_lock_ = false;  // a session lock ends with its session
  spdlog::info("scheduler={} listening on {}", config_.id, model::kWorkChannel);
}

void Scheduler::Maintain(pqxx::connection& conn, Clock::time_point now) {
  if (now - last_heartbeat_ > kHeartbeatInterval) {
    maintenance_.Heartbeat(conn);
    last_heartbeat_ = now;
  }
  if (now - last_full_pass_ + kTickSlack >= config_.tick) {
    all_dirty_ = true;  // safety net: a lost NOTIFY only delays work
    last_full_pass_ = now;
    if (maintenance_.SweepLostHosts(conn)) all_dirty_ = true;
  }
  if (now - last_prune_ >= config_.prune_interval) {
    last_prune_ = now;
    maintenance_.PruneFinished(conn);
  }
}

bool Scheduler::TryIdleLock(pqxx::connection& listen) {
  // Waits a little (kIdleLockWait) rather than trying once: the transactions
  // holding it shared are inserts and reports, over in milliseconds, and
  // while we wait new ones cannot take it shared (they queue behind us), so
  // they NOTIFY, and we hear them once we hold it. Only a long-open inserting
  // transaction, or another scheduler asleep with it, makes us give up.
  try {
    pqxx::nontransaction tx(listen);
    store::SetLockTimeout(tx, std::to_string(kIdleLockWait.count()) + "ms");
    store::TakeIdleLock(tx);
    store::SetLockTimeout(tx, "0");
    return true;
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() != db::sqlstate::kLockNotAvailable) throw;  // the wait timed out
    pqxx::nontransaction tx(listen);
    store::SetLockTimeout(tx, "0");
    return false;
  }
}

void Scheduler::ReleaseIdleLock(pqxx::connection& listen) {
  pqxx::nontransaction tx(listen);
  store::ReleaseIdleLock(tx);
  holds_idle_lock_ = false;
}

bool Scheduler::WaitForWork(pqxx::connection& listen, Clock::time_point now) {
  if (all_dirty_ || !dirty_.empty()) {
    listen.get_notifs();
    return true;
  }
  auto until_tick =
      std::chrono::duration_cast<std::chrono::microseconds>(config_.tick - (now - last_full_pass_));
  if (until_tick.count() < 0) until_tick = std::chrono::microseconds(0);
  if (!holds_idle_lock_) {
    if (!TryIdleLock(listen)) {
      metrics_.Add("pgfleet_scheduler_idle_lock_busy_total", 1);
      return PollForWork(listen, until_tick);
    }
    metrics_.Add("pgfleet_scheduler_sleeps_total", 1);
    // Every waker that skipped its NOTIFY has committed: look once more.
    holds_idle_lock_ = true;
    poll_ = kFirstPoll;
    all_dirty_ = true;
    return true;
  }
  // A retry whose backoff ends wakes nobody: wake for it ourselves, so it
  // starts when its backoff says, not at the next tick.
  auto until = std::min(until_tick, UntilNextRetry(listen));
  listen.await_notification(until.count() / 1000000, until.count() % 1000000);
  listen.get_notifs();
  // Woken with no formation named while a retry's deadline bounded the wait:
  // that deadline came, look. (Not by comparing clocks again: the wait may
  // end up to a millisecond early, and a retry missed here waited for the
  // next tick while next_retry_in, by the database's clock, saw it due.)
  if (until < until_tick && dirty_.empty()) all_dirty_ = true;
  // Still holding the lock: Run gives it back if this pass leaves work waiting.
  return all_dirty_ || !dirty_.empty();
}

std::chrono::microseconds Scheduler::UntilNextRetry(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);
  std::optional<double> seconds = store::NextRetryIn(tx);
  if (!seconds) return std::chrono::microseconds::max();
  // 1 ms late rather than early: woken early, the job is not due yet.
  auto us = static_cast<int64_t>(*seconds * 1e6) + 1000;
  return std::chrono::microseconds(std::max<int64_t>(us, 0));
}

bool Scheduler::PollForWork(pqxx::connection& listen, std::chrono::microseconds until_tick) {
  if (poll_ < kFirstPoll) poll_ = kFirstPoll;
  auto wait = std::min<std::chrono::microseconds>(poll_, until_tick);
  poll_ = std::min<std::chrono::milliseconds>(
      poll_ * 2, std::chrono::duration_cast<std::chrono::milliseconds>(config_.tick));
  listen.await_notification(wait.count() / 1000000, wait.count() % 1000000);
  listen.get_notifs();
  all_dirty_ = true;
  return true;
}

bool Scheduler::WorkDirty(pqxx::connection& conn, const std::atomic<bool>& stop) {
  bool all = all_dirty_;
  std::set<int> dirty;
  dirty.swap(dirty_);
  all_dirty_ = false;
  Targets targets;
  bool assigned = false;
  {
    db::Deadline deadline(conn, kDbDeadline, WorkWho());
    std::vector<int> formations;
    if (!all && dirty.size() == 1) {
      // One formation named (an insert's NOTIFY, or a full batch's return):
      // its pass finds out itself whether there is work, one round trip
      // sooner than asking first.
      formations.push_back(*dirty.begin());
    } else {
      // One statement: no BEGIN and COMMIT round trips.
      pqxx::nontransaction tx(conn);
      formations = store::FormationsToWork(tx, all, dirty);
    }
    std::optional<std::vector<store::SnapshotHost>> pass_hosts;  // loaded when first needed
    for (int id : formations) {
      if (stop) break;
      if (!backoff_.Due(id, Clock::now())) continue;  // failing: its wait has not passed
      deadline.Renew();
      try {
        PgPassStore pass_store(conn);
        auto result = formation_pass_.Work(pass_store, id, &targets, &pass_hosts);
        if (result.more_waiting) dirty_.insert(id);
        assigned = assigned || result.assigned;
        if (backoff_.Succeeded(id)) {
          pqxx::nontransaction tx(conn);
          store::ClearPassError(tx, id);
        }
      } catch (const pqxx::broken_connection&) {
        throw;
      } catch (const std::exception& e) {
        // Rolled back; retried after a backoff (FormationBackoff), so an
        // input that fails every pass never makes this loop spin. Other
        // formations' committed assignments must still be dispatched below.
        auto f = backoff_.Failed(id, Clock::now());
        metrics_.Add("pgfleet_scheduler_errors_total", 1);
        if (f.log) {
          spdlog::warn("formation id={} pass failed ({} in a row), next try in {} ms: {}", id,
                       f.failures, f.wait.count(), e.what());
        }
        try {
          pqxx::nontransaction tx(conn);
          store::RecordPassError(tx, id, e.what(), f.failures);
        } catch (const pqxx::broken_connection&) {
          throw;
        } catch (const std::exception&) {
          // advisory: the log and the metric have it
        }
      }
    }
  }
  // Delivered by the dispatcher's threads: the next pass does not wait for
  // hosts to answer (they start the jobs first).
  dispatcher_.Submit(std::move(targets));
  dispatcher_.ForwardStops(conn);
  return assigned;
}

void Scheduler::AfterError(pqxx::connection* lc, pqxx::connection* wc) {
  if (lc && !lc->is_open()) {
    receiver_.reset();  // closed: no UNLISTEN to wait for
    listen_conn_.MarkBroken("closed");
  }
  if (wc && !wc->is_open()) work_conn_.MarkBroken("closed");
}

void Scheduler::Run(const std::atomic<bool>& stop) {
  while (!stop) {
    // The receiver must go before the connection it is attached to does.
    if (receiver_ && !listen_conn_.IsOpen()) receiver_.reset();
    pqxx::connection* lc = listen_conn_.Get();
    pqxx::connection* wc = work_conn_.Get();
    if (!lc || !wc) {
      std::this_thread::sleep_for(kRetryPause);
      continue;
    }
    try {
      if (listen_conn_.TakeReconnected() || !receiver_) {
        db::Deadline deadline(*lc, kDbDeadline, ListenWho());
        Listen(*lc);
      }
      if (work_conn_.TakeReconnected()) all_dirty_ = true;
      auto now = Clock::now();
      {
        db::Deadline deadline(*wc, kDbDeadline, WorkWho());
        Maintain(*wc, now);
      }
      bool work;
      {
        // Waiting for a NOTIFY lasts up to a tick: that is not the database's delay.
        db::Deadline deadline(*lc, kDbDeadline + config_.tick, ListenWho());
        work = WaitForWork(*lc, now);
      }
      if (work && WorkDirty(*wc, stop)) poll_ = kFirstPoll;
      if (work && holds_idle_lock_) {
        // Busy (work left, or more arrived while this pass ran): give the
        // lock back, so wakers stop notifying while we keep working.
        db::Deadline deadline(*lc, kDbDeadline, ListenWho());
        lc->get_notifs();
        if (all_dirty_ || !dirty_.empty()) ReleaseIdleLock(*lc);
      }
    } catch (const pqxx::broken_connection& e) {
      // Both connections are made again. Dropping the receiver would send
      // UNLISTEN and wait on the listen connection's backend, which may be
      // the one that stopped answering: shut it down first.
      if (listen_conn_.IsOpen()) db::ShutDownSocket(*lc);
      receiver_.reset();
      listen_conn_.MarkBroken(e.what());
      work_conn_.MarkBroken(e.what());
    } catch (const std::exception& e) {
      // A failed statement rolls its transaction back; nothing half-done remains.
      spdlog::error("scheduler={} pass failed, retrying: {}", config_.id, e.what());
      metrics_.Add("pgfleet_scheduler_errors_total", 1);
      all_dirty_ = true;
      std::this_thread::sleep_for(kRetryPause);
      AfterError(lc, wc);
    }
  }
}

}  // namespace pgfleet::schedulerd
