// schedulerd's store, the rollout part (store.h, "rollouts"): reading a
// formation's rollout in progress and recording its steps. Its statements
// (store_rollout.sql) are prepared with the rest by Prepare.

#include "core/db/statements.h"
#include "schedulerd/store.h"
#include "schedulerd/store_rollout.sql.h"

namespace pgfleet::schedulerd::store {

void PrepareRollout(pqxx::connection& conn) {
  db::PrepareAll(conn, {&kActiveRollout, &kRolloutProgress, &kFinishRollout, &kFailRollout});
}

std::optional<ActiveRollout> ReadActiveRollout(pqxx::transaction_base& tx, int formation_id) {
  auto rows = db::Exec(tx, kActiveRollout, formation_id);
  if (rows.empty()) return std::nullopt;
  const auto& r = rows[0];
  ActiveRollout out;
  out.id = r["id"].as<int64_t>();
  out.to_version = r["to_version"].as<int>();
  out.state = r["state"].as<std::string>();
  out.canary = r["canary"].as<int>();
  out.promoted = r["promoted"].as<bool>();
  out.max_parallel = r["max_parallel"].as<std::string>();
  out.healthy = r["healthy"].as<int>();
  out.past_deadline = r["past_deadline"].as<bool>();
  out.progress_deadline = r["progress_deadline"].as<std::string>();
  out.stopping = r["stopping"].as<int>();
  return out;
}

void RecordRolloutProgress(pqxx::transaction_base& tx, int64_t rollout, const std::string& state,
                           int updated, int healthy, const std::string& message) {
  db::Exec(tx, kRolloutProgress, rollout, state, updated, healthy, message);
}

void FinishRollout(pqxx::transaction_base& tx, int64_t rollout, int updated, int healthy) {
  db::Exec(tx, kFinishRollout, rollout, updated, healthy);
}

std::optional<int> FailRollout(pqxx::transaction_base& tx, int64_t rollout,
                               const std::string& why) {
  auto row = db::Exec1(tx, kFailRollout, rollout, why);
  if (row["reverted_to"].is_null()) return std::nullopt;
  return row["reverted_to"].as<int>();
}

}  // namespace pgfleet::schedulerd::store
