#include "cli/plan_queries.h"

#include <nlohmann/json.hpp>
#include <set>

#include "cli/queries.sql.h"
#include "core/db/statements.h"

namespace pgfleet::cli {

using nlohmann::json;

Planned ReadPlacementRequest(pqxx::transaction_base& tx, int64_t id) {
  const json r = json::parse(db::Exec1(tx, kPlacementRequest, id)["doc"].as<std::string>());
  Planned p;
  p.request.id = r.at("id").get<int64_t>();
  p.request.cpu = r.at("cpu").get<int>();
  p.request.memory = r.at("memory").get<int>();
  p.request.priority = r.at("priority").get<int>();
  p.request.constraints = r.at("constraints").get<std::map<std::string, std::string>>();
  p.request.privileged = r.at("privileged").get<bool>();
  p.request.pinned_host = r.at("pinned_host").get<std::string>();
  p.request.bridge = r.at("bridge").get<bool>();
  p.request.ports = r.at("ports").get<std::map<std::string, int>>();
  p.request.rootfs = r.at("rootfs").get<std::string>();
  p.request.spread = r.at("spread").get<std::string>();
  p.formation = r.at("formation").get<std::string>();
  p.state = r.at("state").get<std::string>();
  p.reason = r.at("reason").get<std::string>();
  return p;
}

Fleet ReadPlacementHosts(pqxx::transaction_base& tx, const Planned& p) {
  Fleet f;
  for (const auto& row : db::Exec(tx, kPlacementHosts, p.request.rootfs, p.formation)) {
    const json h = json::parse(row["doc"].as<std::string>());
    if (!h.at("not_up").is_null()) {
      ++f.not_up[h.at("not_up").get<std::string>()];
      continue;
    }
    placement::HostView v;
    v.id = h.at("id").get<std::string>();
    v.cpu_total = h.at("cpu").get<int>();
    v.memory_total = h.at("memory").get<int>();
    v.cpu_allocated = h.at("cpu_allocated").get<int>();
    v.memory_allocated = h.at("memory_allocated").get<int>();
    for (const auto& [key, value] : h.at("labels").items()) {
      if (value.is_string()) v.labels[key] = value.get<std::string>();
    }
    v.isolates = h.at("isolates").get<bool>();
    v.condition = h.at("condition").get<std::string>();
    v.bridge = h.at("bridge").get<bool>();
    v.port_lo = h.at("port_lo").get<int>();
    v.port_hi = h.at("port_hi").get<int>();
    v.ports_held = h.at("ports_held").get<std::set<int>>();
    // Only whether it is warm for this job's rootfs: that is all plan learns.
    if (h.at("warm").get<bool>()) v.rootfs_warm.insert(p.request.rootfs);
    if (int n = h.at("formation_jobs").get<int>(); n > 0) f.running[v.id] = n;
    f.hosts.push_back(std::move(v));
  }
  for (const auto& row : db::Exec(tx, kPreemptionCandidates, p.request.priority)) {
    placement::RunningJob r;
    r.id = row["n"].as<int64_t>();
    r.host_id = row["host_id"].as<std::string>();
    r.cpu = row["cpu"].as<int>();
    r.memory = row["memory"].as<int>();
    r.priority = row["priority"].as<int>();
    r.preemptible = true;
    r.formation = row["formation"].as<std::string>();
    f.preemption.candidates.push_back(std::move(r));
  }
  for (const auto& row : db::Exec(tx, kPreemptionBudgets)) {
    f.preemption.may_lose[row["formation"].as<std::string>()] = row["may_lose"].as<int>();
  }
  return f;
}

}  // namespace pgfleet::cli
