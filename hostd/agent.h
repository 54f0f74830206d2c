#pragma once
// hostd's link to the database, on one thread that owns the connection:
// registration, heartbeats, batched job reports, and the periodic reconcile
// against the jobs the database says this host runs. Hosts never LISTEN.
//
// Outages: while the database is unreachable, jobs keep running and reports
// queue up in memory (in order); on reconnect hostd delivers them, then
// reconciles in full. A second thread, the fence watchdog, kills every job
// of the host once no heartbeat has succeeded for (almost) the host TTL, the
// time after which schedulers may declare the host lost and run its jobs
// elsewhere (docs/failures-hostd.md). The lease file (lease.h) carries the
// time of the last successful heartbeat to the shims and to the next hostd.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "core/db/connection.h"
#include "core/model/constants.h"
#include "core/net/http.h"
#include "hostd/lease.h"
#include "hostd/supervisor.h"

namespace pgfleet::hostd {

// The scheduler's default host TTL, until the database says otherwise.
inline constexpr int64_t kDefaultHostTtlMs = model::kDefaultHostTtlSeconds * 1000;

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
  // Self-fence: SIGKILL all jobs when no heartbeat succeeded for host_ttl
  // (less a small margin, SelfFenceAfter). The database's pgfleet.host_ttl()
  // wins when shorter.
  bool self_fence = true;
  // Also each job's shim fences its job when the lease runs out, so the
  // guarantee holds while hostd itself is down or hung (lease.h). Off by
  // default: a dead hostd then leaves its jobs running until it is back.
  bool shim_fence = false;
  std::chrono::milliseconds host_ttl{kDefaultHostTtlMs};
  std::string data_dir;  // where the lease file lives
};

class Agent {
 public:
  Agent(HostConfig config, metrics::Registry& metrics);
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
  void Watchdog(const std::atomic<bool>& stop);
  void NoteContact(int64_t sent_boottime_ns);
  void SetTtl(int64_t ttl_ms);

  HostConfig config_;
  metrics::Registry& metrics_;
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
  std::string last_error_;  // logged once until a step succeeds again
  // Fence watchdog state. last_contact_: CLOCK_BOOTTIME ns at which the last
  // successful heartbeat (or registration) was *sent*; mirrored in the lease file.
  std::atomic<int64_t> last_contact_{0};
  LeaseWriter lease_;
  std::atomic<int64_t> ttl_ms_{0};
  std::atomic<bool> reregister_{false};      // set by the watchdog after fencing
  std::atomic<bool> first_try_done_{false};  // the first database round has been tried
  bool ttl_warned_ = false;
};

}  // namespace pgfleet::hostd
