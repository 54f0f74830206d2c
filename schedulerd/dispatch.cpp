#include "schedulerd/dispatch.h"

#include <spdlog/spdlog.h>

#include <future>

#include "core/net/endpoint.h"
#include "core/net/http.h"
#include "schedulerd/store.h"

namespace pgfleet::schedulerd {

using nlohmann::json;

std::string Dispatcher::Send(const HostTarget& target) const {
  json body{{"jobs", json::array()}};
  for (const auto& d : target.jobs) {
    body["jobs"].push_back({{"job", d.job_id}, {"attempt", d.attempt}, {"spec", d.spec}});
  }
  // Starting jobs takes the host a few ms each: allow for big batches.
  int timeout = timeout_seconds_ + static_cast<int>(target.jobs.size() / 50);
  try {
    auto ep = net::MakeEndpoint(target.api_url, token_, timeout);
    auto res = ep.client->Post(ep.prefix + "/v1/jobs", body.dump(), "application/json");
    if (!res) return "no answer from " + target.api_url + ": " + httplib::to_string(res.error());
    if (res->status != 200)
      return "HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 200);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

void Dispatcher::Record(pqxx::connection& conn, const std::string& host, const HostTarget& target,
                        const std::string& error) {
  if (error.empty()) {
    metrics_.Add("pgfleet_scheduler_dispatches_total", 1);
    pqxx::work tx(conn);
    store::DispatchSucceeded(tx, host);
    tx.commit();
    return;
  }
  metrics_.Add("pgfleet_scheduler_dispatch_failures_total", 1);
  std::vector<store::DispatchedJob> jobs;
  jobs.reserve(target.jobs.size());
  for (const auto& d : target.jobs) jobs.push_back({d.job_id, d.attempt});
  pqxx::work tx(conn);
  int n = store::DispatchFailed(tx, host, jobs, error);
  tx.commit();
  spdlog::warn("host={} dispatch failed, {} jobs back to pending, host suspended: {}", host, n,
               error);
}

void Dispatcher::DispatchAll(pqxx::connection& conn, const Targets& targets) {
  // One request per host, all hosts in parallel.
  std::vector<std::pair<const std::string*, std::future<std::string>>> calls;
  for (const auto& [host, target] : targets) {
    if (target.jobs.empty()) continue;
    const HostTarget* t = &target;
    calls.emplace_back(&host, std::async(std::launch::async, [this, t] { return Send(*t); }));
  }
  for (auto& [host, fut] : calls) Record(conn, *host, targets.at(*host), fut.get());
}

void Dispatcher::ForwardStops(pqxx::connection& conn) {
  pqxx::work tx(conn);
  auto stops = store::StopsToForward(tx);
  tx.commit();
  for (const auto& s : stops) {
    std::string path =
        "/v1/jobs/" + std::to_string(s.job_id) + "/stop?attempt=" + std::to_string(s.attempt);
    try {
      auto ep = net::MakeEndpoint(s.api_url, token_, timeout_seconds_);
      auto res = ep.client->Post(ep.prefix + path, "", "application/json");
      if (!res || res->status >= 300) {
        spdlog::warn(
            "job={} attempt={} host={}: stop not delivered (hostd's reconcile will stop it)",
            s.job_id, s.attempt, s.host_id);
      }
    } catch (const std::exception& e) {
      spdlog::warn("job={} stop: {}", s.job_id, e.what());
    }
  }
}

}  // namespace pgfleet::schedulerd
