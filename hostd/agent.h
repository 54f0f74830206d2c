#pragma once
// hostd's link to the database, on one thread that owns the connection:
// registration, heartbeats, batched job reports, and the periodic reconcile
// against the jobs the database says this host runs. Hosts never LISTEN.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "core/db/connection.h"
#include "core/net/http.h"
#include "hostd/supervisor.h"

namespace pgfleet::hostd {

struct HostConfig {
  std::string id;
  std::string dsn;
  std::string api_url;  // advertised
  int cpu = 0;          // millicores
  int memory = 0;       // MiB
  std::map<std::string, std::string> labels;
  std::string driver;
  std::string driver_note;
  std::chrono::milliseconds heartbeat_interval{2000};
  std::chrono::milliseconds reconcile_interval{5000};
};

class Agent {
 public:
  Agent(HostConfig config, net::Metrics& metrics);
  void SetSupervisor(Supervisor* supervisor) { supervisor_ = supervisor; }
  // Queues a report for the next batch (thread-safe; never blocks on the database).
  void Enqueue(nlohmann::json report);
  // Runs until *stop; reports still queued then are flushed if the database is up.
  void Run(const std::atomic<bool>& stop);
  // Asks for a reconcile soon (e.g. after a dispatch).
  void Wake();

 private:
  void Register(pqxx::connection& conn);
  void Heartbeat(pqxx::connection& conn);
  bool Flush(pqxx::connection& conn);
  void Reconcile(pqxx::connection& conn);

  HostConfig config_;
  net::Metrics& metrics_;
  Supervisor* supervisor_ = nullptr;
  db::ReconnectingConnection conn_;
  int64_t generation_ = 0;
  bool registered_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<nlohmann::json> queue_;
  bool wake_ = false;
  std::chrono::steady_clock::time_point last_heartbeat_{};
  std::chrono::steady_clock::time_point last_reconcile_{};
};

}  // namespace pgfleet::hostd
