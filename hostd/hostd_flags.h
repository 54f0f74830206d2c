#pragma once
// pgfleet-hostd's own flags (the shared ones are in core/daemon/flags.h):
// their definitions, help texts and checks. hostd/main.cpp reads them and
// fills in what they leave to the machine.

#include <boost/program_options.hpp>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "core/daemon/flags.h"
#include "core/model/job_spec.h"
#include "hostd/drivers/driver.h"
#include "hostd/agent/host_config.h"
#include "hostd/fence/lease.h"

namespace pgfleet::hostd {

struct HostdFlags {
  std::string advertise, driver_name, data_dir, driver_note;
  int cpu = 0, memory = 0;
  double heartbeat = 2.0, reconcile = 5.0;
  double host_ttl = kDefaultHostTtlMs / 1000.0;
  // As given; durations take one syntax everywhere (util::ParseSeconds).
  std::string heartbeat_text = "2s", reconcile_text = "5s",
              host_ttl_text = std::to_string(kDefaultHostTtlMs / 1000) + "s";
  bool self_fence = true, shim_fence = true;
  int simulate = 0;  // > 0: run that many hollow hosts (hostd/hollow/hollow.h)
  std::string id_prefix = "sim-";
  int db_connections = 4;
  bool db_pooled = false;  // --db goes through a transaction-mode pooler
  int log_max_files = model::kDefaultLogMaxFiles;
  int log_max_file_mb = model::kDefaultLogMaxFileMb;
  std::string gc_after_text = "24h";
  std::chrono::seconds gc_after{24 * 3600};
  int gc_disk_percent = 80;
  int disk_full_percent = 95;
  std::string log_forward;  // checked by ParseLogForward (log_forward.h)
  std::string job_ids_text = FormatJobIdRange(JobIdRange{});
  JobIdRange job_ids;
  std::string usage_interval_text = "10s";
  double usage_interval = 10.0;
  std::vector<std::string> labels;
  std::map<std::string, std::string> label_map;
  // Networking (hostd/network/, docs/networking.md).
  std::string cni_config;   // --cni-config DIR; "" = the default conflist
  std::string cni_bin_dir;  // --cni-bin-dir DIR; "" = network::DefaultBinDirs()
  std::string bridge_subnet = "10.89.0.0/16";
  std::string port_range_text = "20000-32000";
  int port_lo = 20000, port_hi = 32000;
};

// "LO-HI": two numbers, 1024 <= LO <= HI <= 65535. Throws
// std::invalid_argument naming --port-range, the value and the rule.
std::pair<int, int> ParsePortRange(const std::string& text);

// The host of a URL ("http://10.0.0.5:7070/" -> "10.0.0.5", "[::1]:80" ->
// "::1"); "" when it has none.
std::string HostOfUrl(const std::string& url);

// Usage line and texts of `pgfleet-hostd --help`.
daemon::DaemonInfo HostdInfo();

// Adds hostd's flags to opts, read into *f.
void AddHostdOptions(boost::program_options::options_description& opts, HostdFlags* f);

// Checks the flags and parses their durations; throws std::invalid_argument
// naming the flag, the value and the rule.
void ValidateHostdFlags(const std::string& id, HostdFlags* f);

}  // namespace pgfleet::hostd
