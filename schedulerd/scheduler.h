#pragma once
// pgfleet-schedulerd's loop: wake on NOTIFY pgfleet_work or on the timer, work
// every formation whose advisory lock it gets, dispatch after commit.
//
// Every decision is made inside one transaction per formation that holds
// pg_try_advisory_xact_lock(lock_class, formation_id): if this process dies
// mid-decision, PostgreSQL rolls it back and frees the lock at once.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "core/db/connection.h"
#include "core/net/http.h"

namespace pgfleet::schedulerd {

struct Config {
  std::string dsn;
  std::string id;                        // row in pgfleet.schedulers
  std::string token;                     // cluster token for hostd's API
  std::chrono::milliseconds tick{1000};  // safety-net timer
  int batch_size = 500;                  // pending jobs claimed per formation per transaction
  int dispatch_timeout_seconds = 3;
  // Hosts silent longer than this are lost (<= 0: pgfleet.settings host_ttl_seconds).
  double host_ttl_seconds = 0;
  std::chrono::seconds retain{7 * 24 * 3600};  // finished jobs older than this are pruned
  std::chrono::seconds prune_interval{60};
};

// One assignment to deliver to a host after commit.
struct Dispatch {
  int64_t job_id = 0;
  int attempt = 0;
  nlohmann::json spec;
};

class Scheduler {
 public:
  Scheduler(Config config, metrics::Registry& metrics);
  ~Scheduler();
  // Runs until *stop becomes true.
  void Run(const std::atomic<bool>& stop);

 private:
  struct HostTarget {
    std::string api_url;
    std::vector<Dispatch> jobs;
  };
  class Receiver;

  void Listen(pqxx::connection& conn);
  std::vector<std::pair<int, std::string>> FormationsToWork(pqxx::connection& conn, bool all,
                                                            const std::set<int>& dirty);
  // Places the formation's pending jobs; returns false when another scheduler holds its lock.
  bool WorkFormation(pqxx::connection& conn, int formation_id, const std::string& name,
                     std::map<std::string, HostTarget>* out);
  // Service formations: creates missing replicas and stops surplus ones (pure
  // core: placement::ReconcileService), inside the formation's transaction.
  void ReconcileReplicas(pqxx::work& tx, int formation_id, const std::string& name, int replicas);
  void DispatchAll(pqxx::connection& conn, std::map<std::string, HostTarget>& targets);
  void ForwardStops(pqxx::connection& conn);
  void Heartbeat(pqxx::connection& conn);
  // Marks silent hosts lost and requeues their attempts (any scheduler may; one wins each host).
  void SweepLostHosts(pqxx::connection& conn);
  // Deletes finished jobs older than --retain, in batches, one scheduler at a time.
  void PruneFinished(pqxx::connection& conn);

  Config config_;
  metrics::Registry& metrics_;
  db::ReconnectingConnection listen_conn_;
  db::ReconnectingConnection work_conn_;
  std::unique_ptr<Receiver> receiver_;
  std::set<int> dirty_;
  bool all_dirty_ = true;
  std::chrono::steady_clock::time_point last_heartbeat_{};
  std::chrono::steady_clock::time_point last_full_pass_{};
  std::chrono::steady_clock::time_point last_prune_{};
};

}  // namespace pgfleet::schedulerd
