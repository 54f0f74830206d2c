#include "hostd/agent/store.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/db/statements.h"
#include "hostd/agent/store.sql.h"

namespace pgfleet::hostd::store {
namespace {

using nlohmann::json;

}  // namespace

void Prepare(pqxx::connection& conn) {
  db::PrepareAll(conn, {&kRegisterHost, &kSetHostKey, &kHostTtl, &kHeartbeat, &kReportJobs,
                        &kWakeSchedulers, &kHostJobs, &kReportRootfsWarm});
}

int64_t RegisterHost(pqxx::transaction_base& tx, const HostConfig& config) {
  json labels = config.labels;
  auto row = db::Exec1(tx, kRegisterHost, config.id, config.api_url, config.cpu, config.memory,
                       labels.dump(), config.driver, config.driver_note, config.port_lo,
                       config.port_hi, db::ArrayParam(config.networks), config.network_note);
  // In the same transaction: a registered host always has the key its tickets are signed with.
  db::Exec(tx, kSetHostKey, config.id, config.ticket_key);
  return row["generation"].as<int64_t>();
}

void ReportRootfsWarm(pqxx::transaction_base& tx, const std::string& host, int64_t generation,
                      const std::vector<std::string>& names) {
  db::Exec(tx, kReportRootfsWarm, host, generation, db::ArrayParam(names));
}

std::chrono::milliseconds HostTtl(pqxx::transaction_base& tx) {
  double seconds = db::Exec1(tx, kHostTtl)["seconds"].as<double>();
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

std::optional<HostStatus> Heartbeat(pqxx::transaction_base& tx, const std::string& host,
                                    int64_t generation, int running_jobs,
                                    const std::string& condition,
                                    const std::vector<UsageReading>* usage) {
  std::optional<std::string> readings;
  if (usage) {
    json a = json::array();
    for (const auto& u : *usage) {
      a.push_back({{"job", u.job},
                   {"attempt", u.attempt},
                   {"cpu_cores", std::round(u.cpu_cores * 1000) / 1000},
                   {"memory_bytes", u.memory_bytes}});
    }
    readings = a.dump();
  }
  auto rows = db::Exec(tx, kHeartbeat, host, generation, running_jobs, condition, readings);
  if (rows.empty()) return std::nullopt;
  HostStatus s;
  s.state = rows[0]["state"].as<std::string>();
  s.lost = rows[0]["lost"].as<bool>();
  s.generation = rows[0]["generation"].as<int64_t>();
  s.live_digest = rows[0]["live_digest"].as<std::string>();
  s.stops = rows[0]["stops"].as<int>();
  return s;
}

void WakeSchedulers(pqxx::transaction_base& tx) { db::Exec(tx, kWakeSchedulers); }

ReportBatchResult ReportJobs(pqxx::transaction_base& tx, const std::string& host,
                             int64_t generation, const std::vector<model::Report>& reports,
                             const AddressOf& address_of) {
  json batch = json::array();
  for (const auto& r : reports) {
    json j = model::ToJson(r);
    if (r.kind == model::ReportKind::kRunning && address_of) {
      if (std::string a = address_of(r.job, r.attempt); !a.empty()) j["address"] = a;
    }
    batch.push_back(std::move(j));
  }
  auto rows = db::Exec(tx, kReportJobs, host, generation,
                       batch.dump(-1, ' ', false, json::error_handler_t::replace));
  ReportBatchResult batch_result;
  std::vector<ReportResult>& out = batch_result.reports;
  out.reserve(rows.size());
  for (const auto& row : rows) {
    if (row["wake_schedulers"].as<bool>()) batch_result.wake_schedulers = true;
    ReportResult r;
    r.job = row["job_id"].as<int64_t>();
    r.attempt = row["attempt"].as<int>();
    r.kind = model::ParseReportKind(row["kind"].as<std::string>());
    r.accepted = row["accepted"].as<bool>();
    r.since_insert = row["since_insert"].as<double>();
    // One row per report, in their order: the uid is what tells which job
    // the answer is about when this host had two of the same id and attempt.
    const size_t i = out.size();
    if (i < reports.size() && reports[i].job == r.job && reports[i].attempt == r.attempt) {
      r.uid = reports[i].uid;
    }
    out.push_back(r);
  }
  return batch_result;
}

std::vector<HostJob> AssignedJobs(pqxx::transaction_base& tx, const std::string& host) {
  auto rows = db::Exec(tx, kHostJobs, host);
  std::vector<HostJob> out;
  out.reserve(rows.size());
  for (const auto& row : rows) {
    HostJob j;
    j.job = row["id"].as<int64_t>();
    j.attempt = row["attempt"].as<int>();
    j.state_name = row["state"].as<std::string>();
    j.state = model::ParseJobState(j.state_name);
    j.stop_wanted = row["stop_wanted"].as<bool>();
    j.stop_force = row["stop_force"].as<bool>();
    j.spec_json = row["spec"].as<std::string>();
    j.uid = row["uid"].as<std::string>();
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace pgfleet::hostd::store
