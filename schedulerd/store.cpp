#include "schedulerd/store.h"

#include <stdexcept>
#include <utility>

#include "core/db/statements.h"
#include "core/model/constants.h"
#include "core/model/states.h"
#include "core/util/text.h"
#include "schedulerd/store.sql.h"
#include "schedulerd/store_preemption.h"

namespace pgfleet::schedulerd::store {
namespace {

using nlohmann::json;

std::map<std::string, std::string> JsonToMap(const std::string& text) {
  std::map<std::string, std::string> m;
  auto j = json::parse(text, nullptr, false);
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      if (v.is_string()) m[k] = v.get<std::string>();
    }
  }
  return m;
}

// A job's ports as the database holds them ({"http": 0}; "" for none). The
// domain pgfleet.spec_ports keeps them whole numbers of 0..65535.
std::map<std::string, int> PortsOf(const std::string& text) {
  std::map<std::string, int> m;
  if (text.empty()) return m;
  auto j = json::parse(text, nullptr, false);
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) {
      if (v.is_number_integer()) m[k] = v.get<int>();
    }
  }
  return m;
}

// An integer array's text form ("{20000,20001}").
std::vector<int> IntArrayOf(const std::string& text) {
  std::vector<int> out;
  int value = 0;
  bool in_number = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      value = value * 10 + (c - '0');
      in_number = true;
    } else {
      if (in_number) out.push_back(value);
      value = 0;
      in_number = false;
    }
  }
  return out;
}

}  // namespace

void PrepareListen(pqxx::connection& conn) {
  db::PrepareAll(conn, {&kSetLockTimeout, &kTakeIdleLock, &kReleaseIdleLock, &kNextRetryIn});
}

void SetLockTimeout(pqxx::transaction_base& tx, const std::string& value) {
  db::Exec(tx, kSetLockTimeout, value);
}

void TakeIdleLock(pqxx::transaction_base& tx) {
  db::Exec(tx, kTakeIdleLock, model::kLockClass, model::kIdleLockKey);
}

void ReleaseIdleLock(pqxx::transaction_base& tx) {
  db::Exec(tx, kReleaseIdleLock, model::kLockClass, model::kIdleLockKey);
}

std::optional<double> NextRetryIn(pqxx::transaction_base& tx) {
  auto r = db::Exec1(tx, kNextRetryIn);
  if (r["seconds"].is_null()) return std::nullopt;
  return r["seconds"].as<double>();
}

void PrepareDispatchOutcomes(pqxx::connection& conn) {
  db::PrepareAll(conn, {&kDispatchSucceeded, &kDispatchFailed, &kDispatchUnanswered});
}

void Prepare(pqxx::connection& conn) {
  db::PrepareAll(
      conn,
      {&kFormationsToWork, &kLockFormation, &kReadPending, &kLoadHostSnapshot, &kLockHosts,
       &kLoadHostConfigs, &kAssignJobs, &kSetPendingReasons, &kLiveReplicas, &kFormationHostCounts,
       &kSystemHosts, &kCreateSystemReplicas, &kSysbatchJobs, &kCreateSysbatchJobs,
       &kCreateReplicas, &kStopJobs, &kStopsToForward, &kRecordPassError, &kClearPassError,
       &kFormationLive, &kOwnerQuotas, &kCronTick});
  PrepareMaintenance(conn);
  PrepareRollout(conn);
  PreparePreemption(conn);
}

std::vector<int> FormationsToWork(pqxx::transaction_base& tx, bool all, const std::set<int>& ids) {
  auto rows = db::Exec(tx, kFormationsToWork, all,
                       db::ArrayParam(std::vector<int>(ids.begin(), ids.end())));
  std::vector<int> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(r["id"].as<int>());
  return out;
}

FormationLock LockFormation(pqxx::transaction_base& tx, int formation_id) {
  auto rows = db::Exec(tx, kLockFormation, formation_id);
  FormationLock out;
  if (rows.empty()) return out;
  out.exists = true;
  if (!rows[0]["locked"].as<bool>()) return out;
  const auto& r = rows[0];
  FormationShape shape;
  shape.is_service = r["is_service"].as<bool>();
  shape.replicas = r["replicas"].as<int>();
  shape.name = r["name"].as<std::string>();
  shape.spread = r["spread"].as<std::string>();
  shape.is_system = r["is_system"].as<bool>();
  shape.is_sysbatch = r["is_sysbatch"].as<bool>();
  shape.done = r["done"].as<bool>();
  shape.is_cron = r["is_cron"].as<bool>();
  shape.cron_due = r["cron_due"].as<bool>();
  shape.rolling_out = r["rolling_out"].as<bool>();
  shape.max_running = r["max_running"].as<int>();
  shape.quotas = r["quotas"].as<bool>();
  out.shape = std::move(shape);
  return out;
}

std::vector<PendingJob> ReadPending(pqxx::transaction_base& tx, const std::string& formation,
                                    int limit) {
  auto rows = db::Exec(tx, kReadPending, formation, limit);
  std::vector<PendingJob> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    PendingJob p;
    p.request.id = r["id"].as<int64_t>();
    p.request.cpu = r["cpu"].as<int>();
    p.request.memory = r["memory"].as<int>();
    p.request.priority = r["priority"].as<int>();
    p.request.constraints = JsonToMap(r["constraints"].as<std::string>());
    p.request.privileged = r["privileged"].as<bool>();
    p.request.pinned_host = r["pinned_host"].as<std::string>();
    p.request.bridge = r["bridge"].as<bool>();
    p.request.ports = PortsOf(r["ports"].as<std::string>());
    p.request.rootfs = r["rootfs"].as<std::string>();
    p.reason = r["reason"].as<std::string>();
    p.owner = r["owner"].as<std::string>();
    out.push_back(std::move(p));
  }
  return out;
}

int FormationLive(pqxx::transaction_base& tx, const std::string& formation) {
  return db::Exec(tx, kFormationLive, formation)[0]["live"].as<int>();
}

std::map<std::string, placement::OwnerQuota> OwnerQuotas(pqxx::transaction_base& tx,
                                                         const std::vector<std::string>& owners) {
  std::map<std::string, placement::OwnerQuota> out;
  auto limit = [](const pqxx::field& f) -> std::optional<int64_t> {
    const auto v = f.as<int64_t>();
    if (v < 0) return std::nullopt;
    return v;
  };
  for (const auto& r : db::Exec(tx, kOwnerQuotas, db::ArrayParam(owners))) {
    placement::OwnerQuota q;
    q.max_cpu = limit(r["max_cpu"]);
    q.max_memory = limit(r["max_memory"]);
    q.max_running = limit(r["max_running"]);
    q.cpu = r["cpu"].as<int64_t>();
    q.memory = r["memory"].as<int64_t>();
    q.running = r["running"].as<int64_t>();
    out.emplace(r["owner"].as<std::string>(), q);
  }
  return out;
}

std::vector<SnapshotHost> LoadHostSnapshot(pqxx::transaction_base& tx, HostConfigs* configs) {
  auto rows = db::Exec(tx, kLoadHostSnapshot);
  std::vector<std::string> ids, stale;
  ids.reserve(rows.size());
  for (const auto& r : rows) {
    ids.push_back(r["id"].as<std::string>());
    auto it = configs->find(ids.back());
    if (it == configs->end() || it->second.version != r["config_version"].as<int64_t>()) {
      stale.push_back(ids.back());
    }
  }
  if (!stale.empty()) {
    for (const auto& r : db::Exec(tx, kLoadHostConfigs, db::ArrayParam(stale))) {
      HostConfig& c = (*configs)[r["id"].as<std::string>()];
      c.version = r["config_version"].as<int64_t>();
      c.labels = JsonToMap(r["labels"].as<std::string>());
      c.api_url = r["api_url"].as<std::string>();
      c.isolates = r["isolates"].as<bool>();
      c.ticket_key = r["ticket_key"].as<std::string>();
      c.rootfs_warm.clear();
      for (const auto& name : json::parse(r["rootfs_warm"].as<std::string>())) {
        c.rootfs_warm.insert(name.get<std::string>());
      }
    }
  }
  std::vector<SnapshotHost> out;
  out.reserve(rows.size());
  HostConfigs seen;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto it = configs->find(ids[i]);
    if (it == configs->end()) continue;  // gone between the two statements
    const auto& r = rows[static_cast<pqxx::result::size_type>(i)];
    SnapshotHost h;
    h.view.id = ids[i];
    h.view.cpu_total = r["cpu"].as<int>();
    h.view.memory_total = r["memory"].as<int>();
    h.view.cpu_allocated = r["cpu_allocated"].as<int>();
    h.view.memory_allocated = r["memory_allocated"].as<int>();
    h.view.labels = it->second.labels;
    h.view.isolates = it->second.isolates;
    h.view.rootfs_warm = it->second.rootfs_warm;
    h.view.condition = r["condition"].as<std::string>();
    h.view.bridge = r["bridge"].as<bool>();
    h.view.port_lo = r["port_lo"].as<int>();
    h.view.port_hi = r["port_hi"].as<int>();
    for (int port : IntArrayOf(r["ports_held"].as<std::string>())) h.view.ports_held.insert(port);
    h.api_url = it->second.api_url;
    h.ticket_key = it->second.ticket_key;
    h.suspensions = r["suspensions"].as<int>();
    out.push_back(std::move(h));
    seen.insert(configs->extract(it));
  }
  configs->swap(seen);  // hosts no longer feasible are forgotten
  return out;
}

std::map<std::string, LockedHost> LockHosts(pqxx::transaction_base& tx,
                                            const std::vector<std::string>& ids) {
  std::map<std::string, LockedHost> out;
  for (const auto& r : db::Exec(tx, kLockHosts, db::ArrayParam(ids))) {
    out[r["id"].as<std::string>()] = {r["cpu"].as<int>(), r["memory"].as<int>(),
                                      r["cpu_allocated"].as<int>(),
                                      r["memory_allocated"].as<int>()};
  }
  return out;
}

std::vector<Assignment> AssignJobs(pqxx::transaction_base& tx,
                                   const std::vector<placement::Placement>& plan) {
  json p = json::array();
  for (const auto& pl : plan) {
    json e = {{"job", pl.job_id}, {"host", pl.host_id}};
    if (!pl.ports.empty()) e["ports"] = pl.ports;
    p.push_back(std::move(e));
  }
  auto rows = db::Exec(tx, kAssignJobs, p.dump());
  std::vector<Assignment> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    // The spec is kept as text and sent as is (parsing it and dumping it
    // again cost the scheduler more than placing the job); only invalid
    // UTF-8, which a SQL_ASCII database can hold, is replaced, so hostd can
    // parse it.
    out.push_back({r["job_id"].as<int64_t>(), r["attempt"].as<int>(),
                   r["host_id"].as<std::string>(), util::SanitizeUtf8(r["spec"].as<std::string>()),
                   r["uid"].as<std::string>(), r["since_insert"].as<double>()});
  }
  return out;
}

void SetPendingReasons(pqxx::transaction_base& tx, const std::map<int64_t, std::string>& reasons) {
  json r = json::array();
  for (const auto& [id, why] : reasons) r.push_back({{"job", id}, {"reason", why}});
  db::Exec(tx, kSetPendingReasons, r.dump());
}

placement::HostCounts FormationHostCounts(pqxx::transaction_base& tx,
                                          const std::string& formation) {
  placement::HostCounts out;
  for (const auto& r : db::Exec(tx, kFormationHostCounts, formation)) {
    out[r["host_id"].as<std::string>()] = r["jobs"].as<int>();
  }
  return out;
}

std::vector<std::string> SystemHosts(pqxx::transaction_base& tx, int formation_id) {
  std::vector<std::string> out;
  for (const auto& r : db::Exec(tx, kSystemHosts, formation_id)) {
    out.push_back(r["host_id"].as<std::string>());
  }
  return out;
}

int CreateSystemReplicas(pqxx::transaction_base& tx, int formation_id,
                         const std::vector<std::string>& hosts) {
  return db::Exec1(tx, kCreateSystemReplicas, formation_id, db::ArrayParam(hosts))["created"]
      .as<int>();
}

std::vector<placement::SysbatchJobView> SysbatchJobs(pqxx::transaction_base& tx, int formation_id) {
  std::vector<placement::SysbatchJobView> out;
  for (const auto& r : db::Exec(tx, kSysbatchJobs, formation_id)) {
    out.push_back({r["id"].as<int64_t>(), r["host_id"].as<std::string>(), r["pending"].as<bool>(),
                   r["host_exists"].as<bool>()});
  }
  return out;
}

int CreateSysbatchJobs(pqxx::transaction_base& tx, int formation_id,
                       const std::vector<std::string>& hosts) {
  return db::Exec1(tx, kCreateSysbatchJobs, formation_id, db::ArrayParam(hosts))["created"]
      .as<int>();
}

int CronTick(pqxx::transaction_base& tx, int formation_id) {
  return db::Exec1(tx, kCronTick, formation_id)["created"].as<int>();
}

std::vector<placement::ReplicaView> LiveReplicas(pqxx::transaction_base& tx,
                                                 const std::string& formation) {
  auto rows = db::Exec(tx, kLiveReplicas, formation);
  std::vector<placement::ReplicaView> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    auto name = r["state"].as<std::string>();
    auto state = model::ParseReplicaState(name);
    if (!state) {
      throw std::runtime_error("job " + r["id"].as<std::string>() + " has state \"" + name +
                               "\", which is not a live replica state");
    }
    out.push_back({r["id"].as<int64_t>(), *state, r["on_leaving_host"].as<bool>(),
                   r["host_id"].as<std::string>(), r["host_state"].as<std::string>(),
                   r["pinned_host"].as<std::string>(), r["version"].as<int>(),
                   r["healthy"].as<bool>(), r["unhealthy"].as<bool>()});
  }
  return out;
}

int CreateReplicas(pqxx::transaction_base& tx, int formation_id, int count) {
  return db::Exec1(tx, kCreateReplicas, formation_id, count)["created"].as<int>();
}

void StopJobs(pqxx::transaction_base& tx, const std::vector<int64_t>& job_ids,
              const std::string& reason) {
  db::Exec(tx, kStopJobs, db::ArrayParam(job_ids), reason);
}

void DispatchSucceeded(pqxx::transaction_base& tx, const std::vector<std::string>& host_ids) {
  db::Exec(tx, kDispatchSucceeded, db::ArrayParam(host_ids));
}

int DispatchFailed(pqxx::transaction_base& tx, const std::string& host_id,
                   const std::vector<DispatchedJob>& jobs, const std::string& error) {
  json j = json::array();
  for (const auto& d : jobs) j.push_back({{"job", d.job_id}, {"attempt", d.attempt}});
  return db::Exec1(tx, kDispatchFailed, host_id, j.dump(), error)["requeued"].as<int>();
}

void DispatchUnanswered(pqxx::transaction_base& tx, const std::string& host_id) {
  db::Exec(tx, kDispatchUnanswered, host_id);
}

std::vector<StopToForward> StopsToForward(pqxx::transaction_base& tx) {
  auto rows = db::Exec(tx, kStopsToForward);
  std::vector<StopToForward> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    out.push_back({r["id"].as<int64_t>(), r["attempt"].as<int>(), r["host_id"].as<std::string>(),
                   r["api_url"].as<std::string>(), r["ticket_key"].as<std::string>(),
                   r["stop_force"].as<bool>()});
  }
  return out;
}

void RecordPassError(pqxx::transaction_base& tx, int formation, const std::string& error,
                     int failures) {
  db::Exec0(tx, kRecordPassError, formation, error.substr(0, 2000), failures);
}

void ClearPassError(pqxx::transaction_base& tx, int formation) {
  db::Exec0(tx, kClearPassError, formation);
}

}  // namespace pgfleet::schedulerd::store
