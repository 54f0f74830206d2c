#pragma once
// What hostd is told about itself (flags), as the agent (agent.h) and the
// store (store.h) use it. Plain data: main fills it in once, before the
// agent starts, and nobody changes it afterwards.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/model/constants.h"

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
  // guarantee holds while hostd itself is stopped, down or hung (lease.h).
  // On by default; off, a stopped hostd leaves its jobs running, possibly
  // next to their replacements, until it is back.
  bool shim_fence = true;
  std::chrono::milliseconds host_ttl{kDefaultHostTtlMs};
  std::string data_dir;  // where the lease file lives
  // The key host tickets are signed with (64 hex digits, core/net/ticket.h):
  // kept in data_dir/ticket.key, registered in pgfleet.host_keys.
  std::string ticket_key;
  // Above this percentage of the data directory's filesystem the host says it
  // is under disk pressure and gets no new jobs (--disk-full-percent).
  int disk_full_percent = 95;
  // How often the running attempts' live usage goes with a heartbeat
  // (--usage-interval; usage.h). At most as often as heartbeats.
  std::chrono::milliseconds usage_interval{10000};
  // The host ports jobs may be given, inclusive (--port-range LO-HI;
  // hosts.port_range).
  int port_lo = 20000;
  int port_hi = 32000;
  // The networks this host can give its jobs (hosts.networks): bridge only
  // where its CNI plugins and configuration work (hostd/network/), and
  // network_note says why not when they do not.
  std::vector<std::string> networks = {"host", "none"};
  std::string network_note;
};

}  // namespace pgfleet::hostd
