#pragma once
// schedulerd's store, the preemption part (store_preemption.sql): what a
// formation pass reads to choose victims for a job that fits nowhere, and
// pgfleet.preempt, which checks the choice again under row locks and stops
// them. Prepared with the rest by store::Prepare; the same rules as store.h
// (no commit here; nothing waits for a row another transaction holds).

#include <cstdint>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "core/placement/preemption.h"

namespace pgfleet::schedulerd::store {

void PreparePreemption(pqxx::connection& conn);

// What placement::PickVictims needs for jobs of priority up to `priority`.
struct PreemptionInputs {
  std::vector<placement::RunningJob> running;  // the candidates, of lower priority
  std::map<std::string, int> may_lose;         // formation -> budget left (min_available)
};
PreemptionInputs ReadPreemptionInputs(pqxx::transaction_base& tx, int priority);

// Which of `jobs` still wait for the victims of their last preemption.
std::set<int64_t> WaitingForVictims(pqxx::transaction_base& tx, const std::vector<int64_t>& jobs);

// pgfleet.preempt: how many of `victims` were stopped for `job` (0: refused).
int Preempt(pqxx::transaction_base& tx, int64_t job, const std::string& host,
            const std::vector<int64_t>& victims);

}  // namespace pgfleet::schedulerd::store
