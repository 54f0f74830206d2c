#pragma once
// Delivering decisions to hosts, after the transaction that made them commits:
// assignments (POST /v1/jobs, one request per host, all hosts in parallel) and
// stop requests (POST /v1/jobs/ID/stop).
//
// What must hold: only committed assignments are ever dispatched, so a host
// never runs a job the database does not say is its. A failed dispatch is
// recorded (pgfleet.dispatch_failed puts the jobs back to pending and suspends
// the host); a failed stop is only logged, since hostd's reconcile stops the
// job anyway. Called by the scheduler loop, on its work connection, outside
// any formation transaction.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "core/metrics/metrics.h"

namespace pgfleet::schedulerd {

// One assignment to deliver to a host after commit.
struct Dispatch {
  int64_t job_id = 0;
  int attempt = 0;
  nlohmann::json spec;
};

// Everything one host is sent in one request.
struct HostTarget {
  std::string api_url;
  std::vector<Dispatch> jobs;
};

// Host id -> what to send it.
using Targets = std::map<std::string, HostTarget>;

class Dispatcher {
 public:
  // token: the cluster token for hostd's API; timeout_seconds: per request,
  // stretched for big batches. metrics must outlive the dispatcher.
  Dispatcher(std::string token, int timeout_seconds, metrics::Registry& metrics)
      : token_(std::move(token)), timeout_seconds_(timeout_seconds), metrics_(metrics) {}

  // Sends each host its batch and records the outcome, one transaction per host.
  void DispatchAll(pqxx::connection& conn, const Targets& targets);
  // Asks hosts to stop the jobs whose desired state is stop.
  void ForwardStops(pqxx::connection& conn);

 private:
  // POSTs one host's batch; returns "" on success, else what went wrong.
  std::string Send(const HostTarget& target) const;
  void Record(pqxx::connection& conn, const std::string& host, const HostTarget& target,
              const std::string& error);

  std::string token_;
  int timeout_seconds_;
  metrics::Registry& metrics_;
};

}  // namespace pgfleet::schedulerd
