#include "hostd/agent/agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "core/db/deadline.h"
#include "hostd/attempt/collector.h"

namespace pgfleet::hostd {

using Clock = std::chrono::steady_clock;

Agent::Agent(HostConfig config, metrics::Registry& metrics)
    : config_(std::move(config)),
      metrics_(metrics),
      conn_(config_.dsn, "host " + config_.id),
      usage_(config_.driver, config_.id),
      watchdog_(config_.id, config_.data_dir, config_.host_ttl, metrics) {
  conn_.SetOnConnect(store::Prepare);
  // Exported at 0 from the start, as a dashboard graphs them.
  for (const char* name : {"pgfleet_host_starts_total", "pgfleet_host_start_failures_total",
                           "pgfleet_host_reports_total", "pgfleet_host_self_fences_total"}) {
    metrics_.Add(name, 0);
  }
  metrics_.Set("pgfleet_host_fenced", 0);
  // Back within a heartbeat of the database: the lease counts from the last
  // heartbeat, so a longer wait would fence after a database outage shorter
  // than the TTL (docs/failures-hostd.md, "Database outages").
  conn_.SetMaxBackoff(
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.heartbeat_interval));
}

void Agent::SetSupervisor(Supervisor* supervisor) {
  supervisor_ = supervisor;
  watchdog_.SetActions(
      {[supervisor](const std::string& reason) { return supervisor->Fence(reason); },
       [supervisor] { supervisor->Unfence(); }});
}

void Agent::SetTtl(std::chrono::milliseconds ttl) {
  watchdog_.SetTtl(ttl);
  if (supervisor_) {
    supervisor_->SetFenceAfter(config_.self_fence && config_.shim_fence
                                   ? SelfFenceAfter(ttl)
                                   : std::chrono::milliseconds(0));
  }
}

void Agent::Enqueue(model::Report report) {
  if (report.kind == model::ReportKind::kRunning) metrics_.Add("pgfleet_host_starts_total", 1);
  if (report.kind == model::ReportKind::kStartFailed) {
    metrics_.Add("pgfleet_host_start_failures_total", 1);
  }
  reports_.Push(std::move(report));
}

void Agent::Wake() { reports_.Wake(); }

void Agent::Register(pqxx::connection& conn) {
  int64_t sent = BootTimeNs();
  pqxx::work tx(conn);
  generation_ = store::RegisterHost(tx, config_);
  // The TTL schedulers judge us by; fencing later than that would let two
  // attempts of a job overlap.
  std::chrono::milliseconds db_ttl = store::HostTtl(tx);
  tx.commit();
  registered_ = true;
  // A new generation: the warm set is written again once it has names (a
  // host that never ran a rootfs writes nothing; a restarted one keeps what
  // its previous life wrote until it starts one).
  rootfs_written_.reset();
  if (!supervisor_ || supervisor_->RecentRootfs().empty()) rootfs_written_.emplace();
  watchdog_.NoteContact(sent);
  auto ttl = std::min(config_.host_ttl, db_ttl);
  if (ttl != watchdog_.ttl()) SetTtl(ttl);
  if (ttl < config_.host_ttl && !ttl_warned_) {
    ttl_warned_ = true;
    spdlog::warn(
        "host={} the database's host TTL is {:.1f} s, shorter than --host-ttl {:.1f} s: "
        "self-fencing uses {:.1f} s",
        config_.id, db_ttl.count() / 1000.0, config_.host_ttl.count() / 1000.0,
        db_ttl.count() / 1000.0);
  }
  spdlog::info("host={} registered generation={} api={} cpu={}m memory={}MiB driver={}", config_.id,
               generation_, config_.api_url, config_.cpu, config_.memory, config_.driver);
}

void Agent::Heartbeat(pqxx::connection& conn) {
  int64_t sent = BootTimeNs();
  // One statement: autocommit saves the BEGIN and COMMIT round trips.
  // Live usage rides along every --usage-interval (not every heartbeat).
  std::vector<UsageReading> usage;
  const bool with_usage = Clock::now() - last_usage_ >= config_.usage_interval;
  if (with_usage) {
    usage = usage_.Sample(supervisor_->List());
    last_usage_ = Clock::now();
  }
  // The statement's transaction ends here: the warm rootfs report below is
  // a statement of its own.
  auto status = [&] {
    pqxx::nontransaction tx(conn);
    return store::Heartbeat(tx, config_.id, generation_, static_cast<int>(supervisor_->LiveCount()),
                            Condition(), with_usage ? &usage : nullptr);
  }();
  metrics_.Add("pgfleet_host_heartbeats_total", 1);
  // Gauges of this host (hollow hosts share a registry: the last one's).
  metrics_.Set("pgfleet_host_running_attempts", static_cast<double>(supervisor_->LiveCount()));
  metrics_.Set("pgfleet_host_report_queue_depth", static_cast<double>(reports_.size()));
  if (!status) {
    spdlog::warn("host={} is not in pgfleet.hosts any more: registering again", config_.id);
    registered_ = false;
    return;
  }
  db_live_digest_ = status->live_digest;
  db_stops_ = status->stops;
  if (status->lost || status->generation != generation_) {
    // We were declared lost (or another hostd took our id): our attempts may
    // have been superseded. Re-register; the reconcile kills what is not ours.
    spdlog::warn("host={} database says state={} generation={} (ours {}): re-registering",
                 config_.id, status->state, status->generation, generation_);
    registered_ = false;
    return;
  }
  watchdog_.NoteContact(sent);
  ReportRootfsIfChanged(conn);
}

void Agent::ReportRootfsIfChanged(pqxx::connection& conn) {
  if (!supervisor_) return;
  std::vector<std::string> names = supervisor_->RecentRootfs();
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  if (rootfs_written_ == sorted) return;
  try {
    pqxx::nontransaction tx(conn);
    store::ReportRootfsWarm(tx, config_.id, generation_, names);
  } catch (const pqxx::broken_connection&) {
    throw;
  } catch (const pqxx::sql_error& e) {
    // Advisory: a refused set is not sent again until it changes, and
    // never fails the heartbeat it follows.
    spdlog::warn("host={} warm rootfs set refused: {}", config_.id, e.what());
  }
  rootfs_written_ = std::move(sorted);
}

std::string Agent::Condition() {
  if (config_.data_dir.empty()) return "";  // hollow hosts keep nothing on disk
  const int percent = Collector::DiskPercent(config_.data_dir);
  const bool pressure = percent >= config_.disk_full_percent;
  metrics_.Set("pgfleet_host_disk_pressure", pressure ? 1 : 0);
  if (pressure != disk_pressure_) {
    disk_pressure_ = pressure;
    if (pressure) {
      spdlog::warn(
          "host={} disk pressure: {} is {}% full (--disk-full-percent {}): taking no new "
          "jobs until it falls below",
          config_.id, config_.data_dir, percent, config_.disk_full_percent);
    } else {
      spdlog::info("host={} disk pressure cleared: {} is {}% full", config_.id, config_.data_dir,
                   percent);
    }
  }
  if (!pressure) return "";
  return fmt::format("disk pressure: data directory {} is {}% full (hostd --disk-full-percent {})",
                     config_.data_dir, percent, config_.disk_full_percent);
}

void Agent::HeartbeatIfDue(pqxx::connection& conn) {
  auto now = Clock::now();
  if (now - last_heartbeat_ < config_.heartbeat_interval) return;
  Heartbeat(conn);
  last_heartbeat_ = now;
}

void Agent::BeginLease() {
  watchdog_.Begin();
  SetTtl(watchdog_.ttl());
}

std::chrono::milliseconds Agent::DbDeadline() const {
  // Short enough that a stuck backend is left, a new connection made and a
  // heartbeat sent before the lease runs out (SelfFenceAfter); long enough
  // for a busy database's slowest step.
  return std::clamp(watchdog_.ttl() / 3, kMinDbDeadline, kMaxDbDeadline);
}

Agent::Clock::time_point Agent::Step(pqxx::connection& conn) {
  db::Deadline deadline(conn, DbDeadline(), "host=" + config_.id);
  if (watchdog_.TakeReregister()) registered_ = false;
  if (!registered_) {
    Register(conn);
    watchdog_.NoteFirstTry();
    force_reconcile_ = true;
    last_heartbeat_ = Clock::now();
  }
  // Heartbeats come first and never wait on more than one report batch: a
  // long queue of reports is delivered between them.
  HeartbeatIfDue(conn);
  if (!registered_) return Clock::now();  // register again at once
  while (Flush(conn)) {
    deadline.Renew();
    HeartbeatIfDue(conn);
    if (!registered_) return Clock::now();
  }
  // A reconcile at most every --reconcile-interval, and then only when the
  // latest heartbeat's answer shows something to do (or the safety net's
  // time came): at rest a host does not ask for its jobs every few seconds.
  auto now = Clock::now();
  const auto safety = config_.reconcile_interval * kReconcileSafetyFactor;
  if (force_reconcile_ || (now - last_reconcile_ >= config_.reconcile_interval &&
                           (now - last_reconcile_ >= safety || ViewDiffers()))) {
    deadline.Renew();
    RetryQuarantined(conn);
    Reconcile(conn);
    metrics_.Add("pgfleet_host_reconciles_total", 1);
    force_reconcile_ = false;
    last_reconcile_ = Clock::now();
  }
  if (!last_error_.empty()) {
    spdlog::info("host={} database steps succeed again", config_.id);
    last_error_.clear();
  }
  // Next: the next heartbeat (whose answer may call for a reconcile), or the
  // reconcile interval's end if it is still ahead, or the safety net's.
  auto next_reconcile = last_reconcile_ + config_.reconcile_interval;
  if (next_reconcile <= now) next_reconcile = last_reconcile_ + safety;
  return std::min(last_heartbeat_ + config_.heartbeat_interval, next_reconcile);
}

void Agent::NoteStepFailed(const std::exception* e) {
  watchdog_.NoteFirstTry();
  if (!e) return;
  if (last_error_ != e->what()) {  // once per distinct failure, not per retry
    spdlog::error("host={} database step failed, retrying: {}", config_.id, e->what());
    last_error_ = e->what();
  }
  metrics_.Add("pgfleet_host_db_errors_total", 1);
}

void Agent::FinalFlush(pqxx::connection& conn) {
  try {
    db::Deadline deadline(conn, DbDeadline(), "host=" + config_.id);
    while (Flush(conn)) {
    }
    if (registered_ && !config_.data_dir.empty()) Heartbeat(conn);
  } catch (const std::exception& e) {
    spdlog::warn("host={} could not flush reports at exit: {}", config_.id, e.what());
  }
}

void Agent::Run(const std::atomic<bool>& stop, const std::function<void()>& begin_leaving,
                const std::function<void()>& finish_leaving) {
  BeginLease();
  std::thread watchdog;
  if (config_.self_fence) {
    watchdog = std::thread([this, &stop] {
      while (!stop) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        WatchdogTick();
      }
    });
  }
  while (!stop) {
    pqxx::connection* conn = conn_.Get();
    if (!conn) {
      NoteStepFailed(nullptr);
      reports_.WaitUntil(Clock::now() + std::chrono::milliseconds(200), stop);
      continue;
    }
    try {
      if (conn_.TakeReconnected()) NoteReconnected();
      reports_.WaitUntil(Step(*conn), stop);
    } catch (const pqxx::broken_connection& e) {
      NoteStepFailed(nullptr);
      conn_.MarkBroken(e.what());
    } catch (const std::exception& e) {
      NoteStepFailed(&e);
      if (!conn->is_open()) conn_.MarkBroken(e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  if (begin_leaving) begin_leaving();
  if (pqxx::connection* conn = conn_.Get()) FinalFlush(*conn);
  if (finish_leaving) {
    finish_leaving();
    if (pqxx::connection* conn = conn_.Get()) FinalFlush(*conn);
  }
  if (watchdog.joinable()) watchdog.join();
}

}  // namespace pgfleet::hostd
