// schedulerd's store, the preemption part (store_preemption.h).

#include "schedulerd/store_preemption.h"

#include "core/db/statements.h"
#include "schedulerd/store_preemption.sql.h"

namespace pgfleet::schedulerd::store {

void PreparePreemption(pqxx::connection& conn) {
  db::PrepareAll(conn,
                 {&kPreemptionCandidates, &kPreemptionBudgets, &kWaitingForVictims, &kPreempt});
}

PreemptionInputs ReadPreemptionInputs(pqxx::transaction_base& tx, int priority) {
  PreemptionInputs out;
  std::set<std::string> formations;
  for (const auto& r : db::Exec(tx, kPreemptionCandidates, priority)) {
    placement::RunningJob j;
    j.id = r["id"].as<int64_t>();
    j.host_id = r["host_id"].as<std::string>();
    j.cpu = r["cpu"].as<int>();
    j.memory = r["memory"].as<int>();
    j.priority = r["priority"].as<int>();
    j.preemptible = true;  // the statement reads only those
    j.formation = r["formation"].as<std::string>();
    formations.insert(j.formation);
    out.running.push_back(std::move(j));
  }
  if (formations.empty()) return out;
  for (const auto& r :
       db::Exec(tx, kPreemptionBudgets,
                db::ArrayParam(std::vector<std::string>(formations.begin(), formations.end())))) {
    out.may_lose[r["name"].as<std::string>()] = r["may_lose"].as<int>();
  }
  return out;
}

std::set<int64_t> WaitingForVictims(pqxx::transaction_base& tx, const std::vector<int64_t>& jobs) {
  std::set<int64_t> out;
  for (const auto& r : db::Exec(tx, kWaitingForVictims, db::ArrayParam(jobs))) {
    out.insert(r["id"].as<int64_t>());
  }
  return out;
}

int Preempt(pqxx::transaction_base& tx, int64_t job, const std::string& host,
            const std::vector<int64_t>& victims) {
  return db::Exec1(tx, kPreempt, job, host, db::ArrayParam(victims))["stopped"].as<int>();
}

}  // namespace pgfleet::schedulerd::store
