#pragma once
// Hollow hosts, as Kubernetes' kubemark: one process runs N simulated hosts
// <id_prefix>1 .. <id_prefix>N. Each is a real hostd as far as the control
// plane can tell: it registers (driver "sim"), heartbeats, serves its API,
// reports in batches, reconciles and self-fences with hostd's own Agent and
// Supervisor code; only its jobs are simulated (sim.h: no process,
// no shim, nothing on disk). So 1,000 hosts fit on a small machine beside
// PostgreSQL and the schedulers (docs/hollow-hosts.md has the costs).
//
// What they share: db_connections database connections, each owned by one
// worker thread that steps its share of the agents (Agent::Step); one fence
// watchdog thread; one HTTP listener (host X's API is under /hosts/X, api.h,
// and X registers with api_url <advertise>/hosts/X); the process's sim timer
// thread. No lease file: there is no shim to read it.

#include <atomic>
#include <chrono>
#include <map>
#include <string>

#include "core/metrics/metrics.h"
#include "hostd/agent/host_config.h"

namespace pgfleet::hostd {

// The fields mean what pgfleet-hostd's flags of the same names mean.
struct HollowOptions {
  int hosts = 1;                       // --simulate N
  std::string id_prefix = "sim-";      // --id-prefix
  std::string dsn;                     // --db (resolved)
  std::string token;                   // the cluster token (--token-file's content)
  std::string listen = "127.0.0.1:0";  // --listen HOST:PORT (port 0: any free port)
  std::string advertise;  // --advertise base URL; default http://<listen with the bound port>
  int cpu = 4000;         // --cpu, millicores per host
  int memory = 8192;      // --memory, MiB per host
  std::map<std::string, std::string> labels;              // --label, on every host
  std::chrono::milliseconds usage_interval{10000};        // --usage-interval
  std::chrono::milliseconds heartbeat_interval{2000};     // --heartbeat-interval
  std::chrono::milliseconds host_ttl{kDefaultHostTtlMs};  // --host-ttl
  std::chrono::milliseconds reconcile_interval{5000};     // --reconcile-interval
  bool self_fence = true;                                 // --self-fence
  int db_connections = 4;                                 // --db-connections
  // Threads of the shared listener. Each serves one connection at a time, and
  // each scheduler keeps up to 8 keep-alive connections to it (schedulerd/dispatch.cpp).
  int http_threads = 32;
  // How long a finished sim attempt stays in a host's memory (SupervisorOptions::keep_finished).
  std::chrono::milliseconds keep_finished{60000};
};

// Throws std::invalid_argument naming the option and the value when one is out of range.
void CheckHollowOptions(const HollowOptions& options);

// Runs the hosts until `stop`, then delivers what reports are queued and
// returns 0; 1 when it cannot listen (logged). Throws std::invalid_argument
// for bad options (CheckHollowOptions).
int RunHollowHosts(const HollowOptions& options, metrics::Registry& metrics,
                   const std::atomic<bool>& stop);

}  // namespace pgfleet::hostd
