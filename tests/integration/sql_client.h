#pragma once
// What the integration tests of sql/'s functions share: a client calling them
// as SQL the way the daemons do (each call its own committed transaction), and
// the host reports of core/model/report.h as JSON.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/test_support.h"

namespace pgfleet::integration {

using json = nlohmann::json;
using testing::TestDatabase;

struct Assigned {
  long long job = 0;
  int attempt = 0;
  std::string host;
};

struct Report {
  long long job = 0;
  int attempt = 0;
  std::string kind;
  bool accepted = false;
};

// Calls on one connection, each in its own committed transaction.
class Sql {
 public:
  explicit Sql(const TestDatabase& db) : conn_(db.Connect()) {}
  // Connected with another DSN, e.g. TestDatabase::DsnAs(login).
  explicit Sql(const std::string& dsn) : conn_(std::make_unique<pqxx::connection>(dsn)) {}

  template <typename... Args>
  pqxx::result Exec(const std::string& sql, Args&&... args) {
    pqxx::work tx(*conn_);
    pqxx::result r = tx.exec_params(sql, std::forward<Args>(args)...);
    tx.commit();
    return r;
  }

  // One value as text ("" for null).
  template <typename... Args>
  std::string Str(const std::string& sql, Args&&... args) {
    pqxx::result r = Exec(sql, std::forward<Args>(args)...);
    return r.at(0).at(0).is_null() ? "" : r[0][0].as<std::string>();
  }

  template <typename... Args>
  long long Num(const std::string& sql, Args&&... args) {
    return std::stoll(Str(sql, std::forward<Args>(args)...));
  }

  // The server's error message, or "" when the call succeeded.
  template <typename... Args>
  std::string ErrorOf(const std::string& sql, Args&&... args) {
    try {
      Exec(sql, std::forward<Args>(args)...);
    } catch (const pqxx::sql_error& e) {
      return e.what();
    }
    return "";
  }

  long long RegisterHost(const std::string& id, int cpu, int memory) {
    return Num(
        "select pgfleet.register_host($1, 'http://127.0.0.1:1', $2, $3, '{}', 'process', null)", id,
        cpu, memory);
  }

  long long Submit(int cpu, int memory = 64, int max_attempts = 1,
                   const std::string& formation = "default") {
    return Num(
        "select pgfleet.submit(array['true'], formation => $1, cpu => $2, memory => $3, "
        "max_attempts => $4)",
        formation, cpu, memory, max_attempts);
  }

  std::vector<Assigned> Assign(const std::vector<long long>& jobs, const std::string& host) {
    json plan = json::array();
    for (long long j : jobs) plan.push_back({{"job", j}, {"host", host}});
    std::vector<Assigned> out;
    for (const auto& row :
         Exec("select job_id, attempt, host_id from pgfleet.assign_jobs($1::jsonb)", plan.dump()))
      out.push_back({row[0].as<long long>(), row[1].as<int>(), row[2].as<std::string>()});
    return out;
  }

  std::vector<Report> ReportJobs(const std::string& host, long long generation,
                                 const json& reports) {
    std::vector<Report> out;
    for (const auto& row :
         Exec("select job_id, attempt, kind, accepted from pgfleet.report_jobs($1, $2, $3::jsonb)",
              host, generation, reports.dump()))
      out.push_back(
          {row[0].as<long long>(), row[1].as<int>(), row[2].as<std::string>(), row[3].as<bool>()});
    return out;
  }

  // Accepted flag of a single report.
  bool ReportOne(const std::string& host, long long generation, const json& report) {
    auto r = ReportJobs(host, generation, json::array({report}));
    return r.size() == 1 && r[0].accepted;
  }

  std::string State(long long job) {
    return Str("select state from pgfleet.jobs where id = $1", job);
  }
  long long Events(long long job, const std::string& kind) {
    return Num("select count(*) from pgfleet.job_events where job_id = $1 and kind = $2", job,
               kind);
  }
  std::string Allocated(const std::string& host) {
    return Str("select cpu_allocated || '/' || memory_allocated from pgfleet.hosts where id = $1",
               host);
  }
  long long Drift() { return Num("select count(*) from pgfleet.allocation_drift"); }

 private:
  std::unique_ptr<pqxx::connection> conn_;
};

inline json Running(long long job, int attempt, int pid = 4242) {
  return {{"job", job}, {"attempt", attempt}, {"kind", "running"}, {"pid", pid}};
}

inline json Exited(long long job, int attempt, int exit_code) {
  return {{"job", job},
          {"attempt", attempt},
          {"kind", "exited"},
          {"exit_code", exit_code},
          {"signal", nullptr},
          {"oom_killed", false},
          {"peak_memory_bytes", 1024},
          {"cpu_seconds", 0.01},
          {"output_tail", "bye\n"},
          {"error", nullptr}};
}

inline json Lost(long long job, int attempt) {
  return {
      {"job", job}, {"attempt", attempt}, {"kind", "lost"}, {"error", "host stopped answering"}};
}
}  // namespace pgfleet::integration
