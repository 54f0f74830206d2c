// The Agent's report delivery: batches of queued reports applied in one
// transaction each, a batch the database refuses for its data halved until
// the bad report stands alone, and that report set aside and retried alone.
// (The rest of the Agent: agent.cpp.)

#include <spdlog/spdlog.h>

#include <chrono>

#include "core/db/sql_state.h"
#include "core/util/text.h"
#include "hostd/agent/agent.h"

namespace pgfleet::hostd {

namespace {
constexpr size_t kReportBatch = 500;
}  // namespace

bool Agent::Flush(pqxx::connection& conn) {
  std::vector<model::Report> batch = reports_.TakeBatch(kReportBatch);
  if (batch.empty()) {
    WakeSchedulersIfFreed(conn);  // one that failed before
    return false;
  }
  size_t settled = 0;  // reports applied or set aside, in order
  try {
    Deliver(conn, batch, 0, batch.size(), &settled);
  } catch (...) {
    reports_.PutBack(batch, settled);  // what is left, in order, for the next try
    throw;
  }
  WakeSchedulersIfFreed(conn);
  return true;
}

void Agent::WakeSchedulersIfFreed(pqxx::connection& conn) {
  if (!wake_schedulers_) return;
  pqxx::nontransaction tx(conn);
  store::WakeSchedulers(tx);
  wake_schedulers_ = false;
}

namespace {
// An error caused by what a report carries (a value out of range, a broken
// constraint, a check in SQL), not by the database being unavailable:
// retrying the same report will fail the same way.
bool IsDataError(const pqxx::sql_error& e) { return db::sqlstate::IsDataError(e.sqlstate()); }
}  // namespace

void Agent::Deliver(pqxx::connection& conn, std::vector<model::Report>& batch, size_t begin,
                    size_t end, size_t* settled) {
  try {
    std::vector<model::Report> part(batch.begin() + static_cast<std::ptrdiff_t>(begin),
                                    batch.begin() + static_cast<std::ptrdiff_t>(end));
    // One statement, so its own transaction: no BEGIN and COMMIT round trips.
    pqxx::nontransaction tx(conn);
    const auto started = std::chrono::steady_clock::now();
    auto results = store::ReportJobs(tx, config_.id, generation_, part, AddressOf());
    tx.commit();
    metrics_.Observe(
        "pgfleet_host_report_batch_seconds",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    *settled = end;
    metrics_.Add("pgfleet_host_reports_total", static_cast<double>(part.size()));
    NoteResults(results);
  } catch (const pqxx::sql_error& e) {
    if (!IsDataError(e)) throw;
    // One bad report must not hold up the others (nor, by failing every
    // step, the heartbeats): halve until it is alone, then set it aside.
    if (end - begin == 1) {
      Quarantine(std::move(batch[begin]), e.what());
      *settled = end;
      return;
    }
    size_t mid = begin + (end - begin) / 2;
    Deliver(conn, batch, begin, mid, settled);
    Deliver(conn, batch, mid, end, settled);
  }
}

store::AddressOf Agent::AddressOf() const {
  if (!supervisor_) return {};
  return [sup = supervisor_](int64_t job, int attempt) { return sup->AddressOf(job, attempt); };
}

void Agent::NoteResults(const store::ReportBatchResult& results) {
  if (results.wake_schedulers) wake_schedulers_ = true;
  for (const auto& r : results.reports) {
    std::string kind = r.kind ? std::string(model::ToString(*r.kind)) : "(unknown kind)";
    // Settled either way: a restarted hostd must not report it again.
    if (r.kind && *r.kind != model::ReportKind::kRunning && *r.kind != model::ReportKind::kHealth) {
      supervisor_->MarkReported(r.job, r.attempt, r.uid, r.accepted);
    }
    if (r.accepted) {
      if (r.since_insert >= 0) metrics_.Observe("pgfleet_host_insert_to_running_seconds", r.since_insert);
      continue;
    }
    spdlog::warn("job={} attempt={} report {} rejected: the attempt is no longer current here",
                 r.job, r.attempt, kind);
    metrics_.Add("pgfleet_host_reports_rejected_total", 1);
    supervisor_->Rejected(r.job, r.attempt, r.uid);
  }
}

void Agent::Quarantine(model::Report report, const std::string& error) {
  spdlog::error(
      "host={} job={} attempt={} report {} set aside: the database refuses it ({}); retried "
      "alone every reconcile, other reports go on",
      config_.id, report.job, report.attempt, model::ToString(report.kind),
      util::Trim(error.substr(0, error.find('\n'))));  // the message, not its SQL context
  metrics_.Add("pgfleet_host_reports_quarantined_total", 1);
  quarantine_.push_back(std::move(report));
}

void Agent::RetryQuarantined(pqxx::connection& conn) {
  std::deque<model::Report> still;
  while (!quarantine_.empty()) {
    model::Report report = std::move(quarantine_.front());
    quarantine_.pop_front();
    try {
      pqxx::nontransaction tx(conn);
      auto results = store::ReportJobs(tx, config_.id, generation_, {report}, AddressOf());
      tx.commit();
      spdlog::info("host={} job={} attempt={} report {} set aside earlier is now applied",
                   config_.id, report.job, report.attempt, model::ToString(report.kind));
      metrics_.Add("pgfleet_host_reports_total", 1);
      NoteResults(results);
    } catch (const pqxx::sql_error& e) {
      if (!IsDataError(e)) {
        quarantine_.push_front(std::move(report));
        for (auto& r : still) quarantine_.push_back(std::move(r));
        throw;
      }
      still.push_back(std::move(report));  // still refused: logged once already
    }
  }
  quarantine_ = std::move(still);
  WakeSchedulersIfFreed(conn);
}

}  // namespace pgfleet::hostd
