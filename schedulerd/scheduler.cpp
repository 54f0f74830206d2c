#include "schedulerd/scheduler.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "core/model/constants.h"
#include "schedulerd/store.h"

namespace pgfleet::schedulerd {

using Clock = std::chrono::steady_clock;

namespace {

// How often this scheduler's row in pgfleet.schedulers is refreshed.
constexpr auto kHeartbeatInterval = std::chrono::seconds(2);
// Pause before retrying after the database is unreachable or a pass failed.
constexpr auto kRetryPause = std::chrono::milliseconds(200);

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
      dispatcher_(config_.token, config_.dispatch_timeout_seconds, metrics),
      maintenance_({config_.id, config_.host_ttl_seconds, config_.retain}, metrics),
      listen_conn_(config_.dsn, "listen connection"),
      work_conn_(config_.dsn, "work connection") {
  work_conn_.SetOnConnect(store::Prepare);
}

Scheduler::~Scheduler() { receiver_.reset(); }

void Scheduler::Listen(pqxx::connection& conn) {
  receiver_.reset();
  receiver_ = std::make_unique<Receiver>(conn, this);
  all_dirty_ = true;  // notifications sent while we were away are gone: full reconcile
  spdlog::info("scheduler={} listening on {}", config_.id, model::kWorkChannel);
}

void Scheduler::Maintain(pqxx::connection& conn, Clock::time_point now) {
  if (now - last_heartbeat_ > kHeartbeatInterval) {
    maintenance_.Heartbeat(conn);
    last_heartbeat_ = now;
  }
  if (now - last_full_pass_ >= config_.tick) {
    all_dirty_ = true;  // safety net: a lost NOTIFY only delays work
    last_full_pass_ = now;
    if (maintenance_.SweepLostHosts(conn)) all_dirty_ = true;
  }
  if (now - last_prune_ >= config_.prune_interval) {
    last_prune_ = now;
    maintenance_.PruneFinished(conn);
  }
}

bool Scheduler::WaitForWork(pqxx::connection& listen, Clock::time_point now) {
  if (all_dirty_ || !dirty_.empty()) {
    listen.get_notifs();
    return true;
  }
  auto wait = config_.tick - (now - last_full_pass_);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(wait).count();
  if (us < 0) us = 0;
  listen.await_notification(us / 1000000, us % 1000000);
  listen.get_notifs();
  return false;
}

void Scheduler::WorkDirty(pqxx::connection& conn, const std::atomic<bool>& stop) {
  bool all = all_dirty_;
  std::set<int> dirty;
  dirty.swap(dirty_);
  all_dirty_ = false;
  std::vector<store::Formation> formations;
  {
    pqxx::work tx(conn);
    formations = store::FormationsToWork(tx, all, dirty);
    tx.commit();
  }
  Targets targets;
  for (const auto& f : formations) {
    if (stop) break;
    try {
      if (formation_pass_.Work(conn, f, &targets).more_waiting) dirty_.insert(f.id);
    } catch (const pqxx::broken_connection&) {
      throw;
    } catch (const std::exception& e) {
      // Rolled back; retried next pass. Other formations' committed
      // assignments must still be dispatched below.
      spdlog::warn("formation={} id={} pass failed, will retry: {}", f.name, f.id, e.what());
      metrics_.Add("pgfleet_scheduler_errors_total", 1);
      dirty_.insert(f.id);
    }
  }
  dispatcher_.DispatchAll(conn, targets);
  dispatcher_.ForwardStops(conn);
}

void Scheduler::AfterError(pqxx::connection* lc, pqxx::connection* wc) {
  if (lc && !lc->is_open()) {
    receiver_.reset();
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
      if (listen_conn_.TakeReconnected() || !receiver_) Listen(*lc);
      if (work_conn_.TakeReconnected()) all_dirty_ = true;
      auto now = Clock::now();
      Maintain(*wc, now);
      if (WaitForWork(*lc, now)) WorkDirty(*wc, stop);
    } catch (const pqxx::broken_connection& e) {
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
