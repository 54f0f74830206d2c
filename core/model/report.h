#pragma once
// A report: what a host tells the database about one attempt of one job.
// hostd builds Reports, queues them, and sends them in batches to
// pgfleet.report_jobs (sql/), which reads exactly the JSON ToJson writes.
//
//   running:       {"job","attempt","kind":"running","pid"}
//   exited:        {"job","attempt","kind":"exited","exit_code"|null,"signal"|null,
//                   "oom_killed","peak_memory_bytes","cpu_seconds","output_tail","error"|null}
//   start_failed:  {"job","attempt","kind":"start_failed","error"}
//   lost:          {"job","attempt","kind":"lost","error"}
//   health:        {"job","attempt","kind":"health","health":"healthy"|"unhealthy","output"}
//                  (sent when the attempt's health changes; not an end)

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/model/health_check.h"
#include "core/model/states.h"

namespace pgfleet::model {

struct Report {
  int64_t job = 0;
  int attempt = 0;
  ReportKind kind = ReportKind::kRunning;
  int64_t pid = 0;  // running: the job's main process as the host sees it
  // exited (exit_code < 0 and signal == 0 are written as null):
  int exit_code = -1;
  int signal = 0;
  bool oom_killed = false;
  int64_t peak_memory_bytes = 0;
  double cpu_seconds = 0;
  std::string output_tail;  // valid UTF-8 (the producer sanitizes)
  std::string error;        // empty = none; start_failed and lost always carry one
  // The job's uid (jobs.uid) as the host knows the attempt; "" = not known.
  // The database applies a report only to the job of that uid.
  std::string uid;
  // health: what the attempt's checks found, and the output of the check
  // that changed it (at most kMaxHealthOutputBytes, valid UTF-8).
  Health health = Health::kUnknown;
  std::string output;

  static Report Running(int64_t job, int attempt, int64_t pid);
  static Report StartFailed(int64_t job, int attempt, std::string error);
  static Report Lost(int64_t job, int attempt, std::string error);
  static Report HealthChanged(int64_t job, int attempt, Health health, std::string output);
  // True for exited, start_failed and lost: the attempt is over.
  bool final() const { return kind != ReportKind::kRunning && kind != ReportKind::kHealth; }
};

nlohmann::json ToJson(const Report& r);
// Reads what ToJson wrote. Throws std::invalid_argument naming the field
// when a field is missing or of the wrong type.
Report ReportFromJson(const nlohmann::json& j);

}  // namespace pgfleet::model
