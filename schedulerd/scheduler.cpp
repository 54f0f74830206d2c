#include "schedulerd/scheduler.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <future>

#include "core/model/constants.h"
#include "core/placement/placement.h"
#include "core/placement/reconcile.h"

namespace pgfleet::schedulerd {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

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

// Also records each host's API URL in *urls, for the dispatch after commit.
std::vector<placement::HostView> LoadHosts(pqxx::work& tx,
                                           std::map<std::string, std::string>* urls) {
  // Feasible hosts: up, heartbeat fresh by the database clock, not suspended.
  auto rows = tx.exec(
      "select h.id, h.cpu, h.memory, h.cpu_allocated, h.memory_allocated, h.labels::text, h.api_url"
      "  from pgfleet.hosts h join pgfleet.host_heartbeats hb on hb.host_id = h.id"
      " where h.state = 'up' and (h.suspended_until is null or h.suspended_until <= now())"
      "   and hb.last_seen > now() - pgfleet.host_ttl()");
  std::vector<placement::HostView> hosts;
  hosts.reserve(rows.size());
  for (const auto& r : rows) {
    placement::HostView h;
    h.id = r[0].as<std::string>();
    h.cpu_total = r[1].as<int>();
    h.memory_total = r[2].as<int>();
    h.cpu_allocated = r[3].as<int>();
    h.memory_allocated = r[4].as<int>();
    h.labels = JsonToMap(r[5].as<std::string>());
    (*urls)[h.id] = r[6].as<std::string>();
    hosts.push_back(std::move(h));
  }
  return hosts;
}

}  // namespace

class Scheduler::Receiver : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& conn, Scheduler* owner)
      : pqxx::notification_receiver(conn, model::kWorkChannel), owner_(owner) {}
  void operator()(const std::string& payload, int) override {
    if (payload == model::kAllFormations) {
      owner_->all_dirty_ = true;
      return;
    }
    try {
      owner_->dirty_.insert(std::stoi(payload));
    } catch (const std::exception&) {
      owner_->all_dirty_ = true;  // unknown payload: be safe, look at everything
    }
  }

 private:
  Scheduler* owner_;
};

Scheduler::Scheduler(Config config, metrics::Registry& metrics)
    : config_(std::move(config)),
      metrics_(metrics),
      listen_conn_(config_.dsn, "listen connection"),
      work_conn_(config_.dsn, "work connection") {}

Scheduler::~Scheduler() { receiver_.reset(); }

void Scheduler::Listen(pqxx::connection& conn) {
  receiver_.reset();
  receiver_ = std::make_unique<Receiver>(conn, this);
  all_dirty_ = true;  // notifications sent while we were away are gone: full reconcile
  spdlog::info("scheduler={} listening on {}", config_.id, model::kWorkChannel);
}

void Scheduler::Heartbeat(pqxx::connection& conn) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  pqxx::work tx(conn);
  tx.exec_params0(
      "insert into pgfleet.schedulers (id, hostname, pid) values ($1, $2, $3)"
      " on conflict (id) do update set last_seen = now(), hostname = excluded.hostname,"
      " pid = excluded.pid",
      config_.id, std::string(host), static_cast<int>(getpid()));
  tx.commit();
}

std::vector<std::pair<int, std::string>> Scheduler::FormationsToWork(pqxx::connection& conn,
                                                                     bool all,
                                                                     const std::set<int>& dirty) {
  pqxx::work tx(conn);
  pqxx::result rows;
  // Formations with placeable pending jobs, highest waiting priority first, so
  // that when capacity is short higher-priority work is placed first; then
  // service formations whose replicas differ from what is wanted (count, or
  // replicas on draining/offline hosts to move).
  const char* base =
      "select f.id, f.name from pgfleet.formations f"
      "  left join lateral (select max(j.priority) as p from pgfleet.jobs j"
      "                      where j.formation = f.name and j.state = 'pending'"
      "                        and j.desired_state = 'run'"
      "                        and (j.not_before is null or j.not_before <= now())) m on true"
      " where (m.p is not null"
      "    or (f.kind = 'service'"
      "        and (f.replicas <> (select count(*) from pgfleet.jobs j where j.formation = f.name"
      "                              and j.state in ('pending', 'assigned', 'running')"
      "                              and j.desired_state = 'run')"
      "             or exists (select 1 from pgfleet.jobs j join pgfleet.hosts h on h.id = "
      "j.host_id"
      "                         where j.formation = f.name and j.state in ('assigned', 'running')"
      "                           and j.desired_state = 'run' and h.state in ('draining', "
      "'offline')))))";
  if (all) {
    rows = tx.exec(std::string(base) + " order by m.p desc nulls last, f.id");
  } else {
    std::string ids = "{";
    for (int id : dirty) ids += (ids.size() > 1 ? "," : "") + std::to_string(id);
    ids += "}";
    rows = tx.exec_params(
        std::string(base) + " and f.id = any($1::integer[]) order by m.p desc nulls last, f.id",
        ids);
  }
  tx.commit();
  std::vector<std::pair<int, std::string>> out;
  for (const auto& r : rows) out.emplace_back(r[0].as<int>(), r[1].as<std::string>());
  return out;
}

void Scheduler::ReconcileReplicas(pqxx::work& tx, int formation_id, const std::string& name,
                                  int replicas) {
  auto rows = tx.exec_params(
      "select j.id, j.state, coalesce(j.state in ('assigned', 'running') and h.state in "
      "('draining', 'offline'), false)"
      "  from pgfleet.jobs j left join pgfleet.hosts h on h.id = j.host_id"
      " where j.formation = $1 and j.state in ('pending', 'assigned', 'running') and "
      "j.desired_state = 'run'"
      " for update of j",
      name);
  std::vector<placement::ReplicaView> live;
  for (const auto& r : rows)
    live.push_back({r[0].as<int64_t>(),
                    model::ParseReplicaState(r[1].as<std::string>()).value_or(
                        model::ReplicaState::kRunning),
                    r[2].as<bool>()});
  auto result = placement::ReconcileService(replicas, live);
  if (result.to_create > 0) {
    tx.exec_params(
        "insert into pgfleet.jobs (formation, command, env, cpu, memory, constraints, priority)"
        " select f.name, f.command, f.env, f.cpu, f.memory, f.constraints, f.priority"
        "   from pgfleet.formations f, generate_series(1, $2) where f.id = $1",
        formation_id, result.to_create);
  }
  if (!result.to_stop.empty()) {
    std::string ids = "{";
    for (int64_t id : result.to_stop) ids += (ids.size() > 1 ? "," : "") + std::to_string(id);
    ids += "}";
    std::string reason =
        static_cast<int>(live.size()) - static_cast<int>(result.to_stop.size()) +
                    result.to_create >=
                replicas
            ? "service " + name + " scaled to " + std::to_string(replicas) + " replicas"
            : "moved off a draining host";
    tx.exec_params("select pgfleet.stop_jobs($1::bigint[], $2)", ids, reason);
  }
  if (result.to_create > 0 || !result.to_stop.empty()) {
    metrics_.Add("pgfleet_scheduler_replicas_created_total", result.to_create);
    metrics_.Add("pgfleet_scheduler_replicas_stopped_total",
                 static_cast<double>(result.to_stop.size()));
    spdlog::info("formation={} service replicas={} live={} create={} stop={}", name, replicas,
                 live.size(), result.to_create, result.to_stop.size());
  }
}

bool Scheduler::WorkFormation(pqxx::connection& conn, int formation_id, const std::string& name,
                              std::map<std::string, HostTarget>* out) {
  pqxx::work tx(conn);
  if (!tx.exec_params1("select pgfleet.try_lock_formation($1)", formation_id)[0].as<bool>()) {
    metrics_.Add("pgfleet_scheduler_formation_lock_busy_total", 1);
    return false;
  }
  auto formation =
      tx.exec_params1("select kind, replicas from pgfleet.formations where id = $1", formation_id);
  if (formation[0].as<std::string>() == "service") {
    ReconcileReplicas(tx, formation_id, name, formation[1].as<int>());
  }
  auto claimed = tx.exec_params(
      "select j.id, j.cpu, j.memory, j.priority, j.constraints::text, pgfleet.job_spec(j)::text"
      "  from pgfleet.jobs j"
      " where j.formation = $1 and j.state = 'pending' and j.desired_state = 'run'"
      "   and (j.not_before is null or j.not_before <= now())"
      " order by j.priority desc, j.id limit $2 for update skip locked",
      name, config_.batch_size);
  if (claimed.empty()) {
    tx.commit();
    return true;
  }
  std::vector<placement::JobRequest> jobs;
  std::map<int64_t, json> specs;
  for (const auto& r : claimed) {
    placement::JobRequest j;
    j.id = r[0].as<int64_t>();
    j.cpu = r[1].as<int>();
    j.memory = r[2].as<int>();
    j.priority = r[3].as<int>();
    j.constraints = JsonToMap(r[4].as<std::string>());
    specs[j.id] = json::parse(r[5].as<std::string>());
    jobs.push_back(std::move(j));
  }

  std::map<std::string, HostTarget> planned;  // moved to *out only after commit
  std::map<std::string, std::string> urls;    // host id -> API URL, from the snapshots
  std::map<int64_t, std::string> reasons;
  std::vector<placement::JobRequest> todo = jobs;
  size_t assigned_count = 0;
  // Optimistic rounds: plan against a snapshot, commit per host conditionally;
  // jobs whose host filled up meanwhile are re-planned against fresh state.
  for (int round = 0; round < model::kReplanRounds && !todo.empty(); ++round) {
    auto plan = placement::PlanPlacements(todo, LoadHosts(tx, &urls));
    for (const auto& u : plan.unplaced) reasons[u.job_id] = u.reason;
    if (plan.placements.empty()) break;
    json p = json::array();
    for (const auto& pl : plan.placements) p.push_back({{"job", pl.job_id}, {"host", pl.host_id}});
    auto rows = tx.exec_params(
        "select job_id, attempt, host_id from pgfleet.assign_jobs($1::jsonb)", p.dump());
    std::set<int64_t> done;
    for (const auto& r : rows) {
      int64_t id = r[0].as<int64_t>();
      done.insert(id);
      std::string host = r[2].as<std::string>();
      planned[host].jobs.push_back(Dispatch{id, r[1].as<int>(), specs[id]});
      reasons.erase(id);
    }
    assigned_count += done.size();
    std::vector<placement::JobRequest> retry;
    for (const auto& pl : plan.placements) {
      if (done.count(pl.job_id)) continue;
      for (const auto& j : todo) {
        if (j.id == pl.job_id) retry.push_back(j);
      }
      reasons[pl.job_id] = "waiting for capacity: the host filled up while placing";
      metrics_.Add("pgfleet_scheduler_replans_total", 1);
    }
    todo = std::move(retry);
  }
  if (!reasons.empty()) {
    json r = json::array();
    for (auto& [id, why] : reasons) r.push_back({{"job", id}, {"reason", why}});
    tx.exec_params("select pgfleet.set_pending_reasons($1::jsonb)", r.dump());
  }
  tx.commit();
  // Only committed assignments are ever dispatched.
  for (auto& [host, target] : planned) {
    auto& dest = (*out)[host];
    dest.api_url = urls[host];
    for (auto& d : target.jobs) dest.jobs.push_back(std::move(d));
  }
  metrics_.Add("pgfleet_scheduler_jobs_assigned_total", static_cast<double>(assigned_count));
  if (assigned_count > 0 || !reasons.empty()) {
    spdlog::info("formation={} id={} claimed={} assigned={} waiting={}", name, formation_id,
                 claimed.size(), assigned_count, reasons.size());
  }
  // A full batch means more may be waiting: come back to this formation at once.
  if (static_cast<int>(claimed.size()) == config_.batch_size && assigned_count > 0) {
    dirty_.insert(formation_id);
  }
  return true;
}

void Scheduler::DispatchAll(pqxx::connection& conn, std::map<std::string, HostTarget>& targets) {
  // One request per host, all hosts in parallel.
  std::vector<std::pair<std::string, std::future<std::string>>> calls;
  for (auto& [host, target] : targets) {
    if (target.jobs.empty()) continue;
    json body{{"jobs", json::array()}};
    for (const auto& d : target.jobs) {
      body["jobs"].push_back({{"job", d.job_id}, {"attempt", d.attempt}, {"spec", d.spec}});
    }
    std::string url = target.api_url, token = config_.token;
    // Starting jobs takes the host a few ms each: allow for big batches.
    int timeout = config_.dispatch_timeout_seconds + static_cast<int>(target.jobs.size() / 50);
    calls.emplace_back(
        host, std::async(std::launch::async, [url, token, timeout, body]() -> std::string {
          try {
            auto client = net::MakeClient(url, token, timeout);
            auto res = client->Post("/v1/jobs", body.dump(), "application/json");
            if (!res) return "no answer from " + url + ": " + httplib::to_string(res.error());
            if (res->status != 200)
              return "HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 200);
            return "";
          } catch (const std::exception& e) {
            return e.what();
          }
        }));
  }
  for (auto& [host, fut] : calls) {
    std::string err = fut.get();
    auto& target = targets[host];
    if (err.empty()) {
      metrics_.Add("pgfleet_scheduler_dispatches_total", 1);
      pqxx::work tx(conn);
      tx.exec_params("select pgfleet.dispatch_succeeded($1)", host);
      tx.commit();
      continue;
    }
    metrics_.Add("pgfleet_scheduler_dispatch_failures_total", 1);
    json jobs = json::array();
    for (const auto& d : target.jobs) jobs.push_back({{"job", d.job_id}, {"attempt", d.attempt}});
    pqxx::work tx(conn);
    int n = tx.exec_params1("select pgfleet.dispatch_failed($1, $2::jsonb, $3)", host, jobs.dump(),
                            err)[0]
                .as<int>();
    tx.commit();
    spdlog::warn("host={} dispatch failed, {} jobs back to pending, host suspended: {}", host, n,
                 err);
  }
}

void Scheduler::ForwardStops(pqxx::connection& conn) {
  pqxx::work tx(conn);
  auto rows = tx.exec(
      "select j.id, j.attempt, j.host_id, h.api_url from pgfleet.jobs j"
      "  join pgfleet.hosts h on h.id = j.host_id"
      " where j.desired_state = 'stop' and j.state in ('assigned', 'running')");
  tx.commit();
  for (const auto& r : rows) {
    std::string path =
        "/v1/jobs/" + r[0].as<std::string>() + "/stop?attempt=" + r[1].as<std::string>();
    try {
      auto client =
          net::MakeClient(r[3].as<std::string>(), config_.token, config_.dispatch_timeout_seconds);
      auto res = client->Post(path.c_str(), "", "application/json");
      if (!res || res->status >= 300) {
        spdlog::warn(
            "job={} attempt={} host={}: stop not delivered (hostd's reconcile will stop it)",
            r[0].as<std::string>(), r[1].as<std::string>(), r[2].as<std::string>());
      }
    } catch (const std::exception& e) {
      spdlog::warn("job={} stop: {}", r[0].as<std::string>(), e.what());
    }
  }
}

void Scheduler::SweepLostHosts(pqxx::connection& conn) {
  pqxx::work tx(conn);
  double ttl = config_.host_ttl_seconds;
  if (ttl <= 0)
    ttl = tx.exec1("select extract(epoch from pgfleet.host_ttl())::float8")[0].as<double>();
  auto rows = tx.exec_params("select host_id, requeued from pgfleet.sweep_lost_hosts($1)", ttl);
  int evicted = tx.exec1("select pgfleet.evict_overdue_drains()")[0].as<int>();
  tx.commit();
  if (evicted > 0) {
    spdlog::info("{} jobs on draining hosts past their deadline are being stopped and requeued",
                 evicted);
    all_dirty_ = true;
  }
  for (const auto& r : rows) {
    metrics_.Add("pgfleet_scheduler_hosts_lost_total", 1);
    metrics_.Add("pgfleet_scheduler_jobs_lost_total", r[1].as<double>());
    spdlog::warn("host={} lost: no heartbeat for {}s; {} attempts requeued", r[0].as<std::string>(),
                 ttl, r[1].as<int>());
    all_dirty_ = true;
  }
}

void Scheduler::PruneFinished(pqxx::connection& conn) {
  int total = 0;
  for (int batch = 0; batch < 20; ++batch) {
    pqxx::work tx(conn);
    if (!tx.exec_params1("select pg_try_advisory_xact_lock($1, $2)", model::kLockClass,
                         model::kPruneLockKey)[0]
             .as<bool>()) {
      return;  // another scheduler is pruning
    }
    int n = tx.exec_params1("select pgfleet.prune_finished(make_interval(secs => $1), 1000)",
                            static_cast<double>(config_.retain.count()))[0]
                .as<int>();
    tx.exec("delete from pgfleet.schedulers where last_seen < now() - interval '1 day'");
    tx.commit();
    total += n;
    if (n < 1000) break;
  }
  if (total > 0) {
    metrics_.Add("pgfleet_scheduler_jobs_pruned_total", total);
    spdlog::info("scheduler={} pruned {} finished jobs older than {}s", config_.id, total,
                 config_.retain.count());
  }
}

void Scheduler::Run(const std::atomic<bool>& stop) {
  while (!stop) {
    // The receiver must go before the connection it is attached to does.
    if (receiver_ && !listen_conn_.IsOpen()) receiver_.reset();
    pqxx::connection* lc = listen_conn_.Get();
    pqxx::connection* wc = work_conn_.Get();
    if (!lc || !wc) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    try {
      if (listen_conn_.TakeReconnected() || !receiver_) Listen(*lc);
      if (work_conn_.TakeReconnected()) all_dirty_ = true;
      auto now = Clock::now();
      if (now - last_heartbeat_ > std::chrono::seconds(2)) {
        Heartbeat(*wc);
        last_heartbeat_ = now;
      }
      if (now - last_full_pass_ >= config_.tick) {
        all_dirty_ = true;  // safety net: a lost NOTIFY only delays work
        last_full_pass_ = now;
        SweepLostHosts(*wc);
      }
      if (now - last_prune_ >= config_.prune_interval) {
        last_prune_ = now;
        PruneFinished(*wc);
      }
      if (!all_dirty_ && dirty_.empty()) {
        auto wait = config_.tick - (now - last_full_pass_);
        auto us = std::chrono::duration_cast<std::chrono::microseconds>(wait).count();
        if (us < 0) us = 0;
        lc->await_notification(us / 1000000, us % 1000000);
        lc->get_notifs();
        continue;
      }
      lc->get_notifs();
      bool all = all_dirty_;
      std::set<int> dirty;
      dirty.swap(dirty_);
      all_dirty_ = false;
      std::map<std::string, HostTarget> targets;
      for (const auto& [id, name] : FormationsToWork(*wc, all, dirty)) {
        if (stop) break;
        try {
          WorkFormation(*wc, id, name, &targets);
        } catch (const pqxx::broken_connection&) {
          throw;
        } catch (const std::exception& e) {
          // Rolled back; retried next pass. Other formations' committed
          // assignments must still be dispatched below.
          spdlog::warn("formation={} id={} pass failed, will retry: {}", name, id, e.what());
          metrics_.Add("pgfleet_scheduler_errors_total", 1);
          dirty_.insert(id);
        }
      }
      DispatchAll(*wc, targets);
      ForwardStops(*wc);
    } catch (const pqxx::broken_connection& e) {
      receiver_.reset();
      listen_conn_.MarkBroken(e.what());
      work_conn_.MarkBroken(e.what());
    } catch (const std::exception& e) {
      // A failed statement rolls its transaction back; nothing half-done remains.
      spdlog::error("scheduler={} pass failed, retrying: {}", config_.id, e.what());
      metrics_.Add("pgfleet_scheduler_errors_total", 1);
      all_dirty_ = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (lc && !lc->is_open()) {
        receiver_.reset();
        listen_conn_.MarkBroken("closed");
      }
      if (wc && !wc->is_open()) work_conn_.MarkBroken("closed");
    }
  }
}

}  // namespace pgfleet::schedulerd
