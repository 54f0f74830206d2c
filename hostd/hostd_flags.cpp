#include "hostd/hostd_flags.h"

#include <fmt/format.h>

#include <stdexcept>
#include <tuple>
#include <utility>

#include "core/util/text.h"
#include "hostd/network/cni_config.h"
#include "hostd/output/log_forward.h"

namespace pgfleet::hostd {

namespace po = boost::program_options;

namespace {

// Jobs are fenced SelfFenceAfter(ttl) after the last successful heartbeat
// (lease.h): that must leave room for two heartbeats, or one slow heartbeat
// would kill every job on a healthy host.
void CheckFenceMargin(const HostdFlags& f) {
  if (!f.self_fence) return;
  auto ttl = std::chrono::milliseconds(static_cast<int64_t>(f.host_ttl * 1000));
  double fence = std::chrono::duration<double>(SelfFenceAfter(ttl)).count();
  if (fence < 2 * f.heartbeat) {
    throw std::invalid_argument(fmt::format(
        "--host-ttl {:g} fences jobs {:g} s after the last heartbeat (the TTL less a margin): "
        "that must be at least 2 x --heartbeat-interval ({:g} s)",
        f.host_ttl, fence, f.heartbeat));
  }
}

}  // namespace

daemon::DaemonInfo HostdInfo() {
  return {
      "pgfleet-hostd",
      "hostd",
      "pgfleet-hostd --db DSN --id ID --token-file FILE [--listen ADDR] [--advertise URL]"
      " [--driver container|process|sim] [--cpu N] [--memory N] [--label k=v]..."
      " [--data-dir DIR] [--host-ttl S] [--self-fence=true|false] [--self-fence-shims=true|false]"
      " [--db-pooled]\n"
      "       pgfleet-hostd --db DSN --token-file FILE --simulate N [--id-prefix P]"
      " [--db-connections K] [--db-pooled] [--listen ADDR] [--cpu N] [--memory N] (hollow hosts)",
      "pgfleet-hostd options (each job runs under `pgfleet-hostd shim DIR`, a per-job process\n"
      "hostd starts itself: jobs keep running across hostd restarts; docs/failures-hostd.md)",
      "host id (required)",
      "API address HOST:PORT (port 0: any free port)"};
}

void AddHostdOptions(po::options_description& opts, HostdFlags* f) {
  opts.add_options()(
      "advertise", po::value(&f->advertise),
      "URL schedulers use to reach this host (default http://<listen>, https:// with --tls-cert)")(
      "driver", po::value(&f->driver_name)->default_value("auto"),
      "container, process, sim (jobs run no process: PGFLEET_SIM_SECONDS, PGFLEET_SIM_EXIT_CODE "
      "in their env), or auto")(
      "simulate", po::value(&f->simulate)->default_value(0),
      "run N hollow hosts in this process (driver sim, ids <id-prefix>1..N, one listener: host "
      "X's API under /hosts/X; docs/hollow-hosts.md)")(
      "id-prefix", po::value(&f->id_prefix)->default_value("sim-"), "--simulate: host id prefix")(
      "db-connections", po::value(&f->db_connections)->default_value(4),
      "--simulate: database connections the hollow hosts share")(
      "db-pooled", po::value(&f->db_pooled)->default_value(false)->implicit_value(true),
      "--db goes through a transaction-mode pooler (pgbouncer pool_mode = transaction), so "
      "thousands of hosts share a few server connections: statements are sent unnamed, no "
      "session settings (docs/operations.md, \"A large fleet\")")(
      "cpu", po::value(&f->cpu)->default_value(0),
      "millicores offered (default: all cores x 1000)")(
      "memory", po::value(&f->memory)->default_value(0),
      "MiB offered (default: the machine's memory)")(
      "label", po::value(&f->labels)->composing(),
      "label KEY=VALUE for job constraints (repeatable)")(
      "heartbeat-interval", po::value(&f->heartbeat_text)->default_value(f->heartbeat_text),
      "time between heartbeats (500ms, 2s, 1.5, ...)")(
      "reconcile-interval", po::value(&f->reconcile_text)->default_value(f->reconcile_text),
      "least time between reconciles with the database; one runs when a heartbeat's answer "
      "shows the database's view of this host's attempts differs from hostd's, and every 12 "
      "intervals whatever it shows")(
      "host-ttl", po::value(&f->host_ttl_text)->default_value(f->host_ttl_text),
      "seconds without a heartbeat after which schedulers declare this host lost; must match "
      "the database's settings.host_ttl_seconds (the shorter of the two is used)")(
      "self-fence", po::value(&f->self_fence)->default_value(true)->implicit_value(true),
      "SIGKILL every job when no heartbeat has succeeded for host-ttl (less a 0.5 s margin), "
      "so a cut-off host never runs a job next to its replacement; --self-fence=false keeps "
      "jobs running through database outages instead")(
      "self-fence-shims", po::value(&f->shim_fence)->default_value(true)->implicit_value(true),
      "each job's shim also SIGKILLs its job at that deadline, so the guarantee holds while "
      "hostd itself is stopped, dead or hung (a hostd back within the deadline keeps its jobs); "
      "=false leaves the jobs of a stopped hostd running, possibly next to their replacements")(
      "data-dir", po::value(&f->data_dir),
      "directory for job logs and state (default ./pgfleet-data/<id>)")(
      "log-max-files", po::value(&f->log_max_files)->default_value(f->log_max_files),
      "output files kept per job attempt (the oldest is removed), when its spec sets no "
      "log_max_files; 2-100")(
      "log-max-file-mb", po::value(&f->log_max_file_mb)->default_value(f->log_max_file_mb),
      "MiB per output file, when the job's spec sets no log_max_file_mb; 1-1024")(
      "gc-after", po::value(&f->gc_after_text)->default_value(f->gc_after_text),
      "remove a finished attempt's directory (its output) this long after it ended (90s, 15m, "
      "24h, 7d); the database keeps its events and output tail")(
      "gc-disk-percent", po::value(&f->gc_disk_percent)->default_value(f->gc_disk_percent),
      "remove finished attempts sooner, oldest first, while the data directory's filesystem is "
      "fuller than this (1-100)")(
      "disk-full-percent", po::value(&f->disk_full_percent)->default_value(f->disk_full_percent),
      "at or above this percentage of the data directory's filesystem, take no new jobs (a "
      "disk pressure condition in pgfleet.host_status) until it falls below (1-100)")(
      "usage-interval", po::value(&f->usage_interval_text)->default_value(f->usage_interval_text),
      "how often each running job's CPU and memory in use go to the database, with a heartbeat "
      "(pgfleet.visible_jobs cpu_used, memory_used_bytes; pgfleet ps); 1s to 1h")(
      "log-forward", po::value(&f->log_forward),
      "also send each line of every job's output, with its job id, attempt, formation and "
      "host, to journald (journald) or to a syslog server over UDP in RFC 5424 "
      "(syslog://HOST:PORT); off by default")(
      "job-ids", po::value(&f->job_ids_text)->default_value(f->job_ids_text),
      "START:COUNT: the host uids and gids every unprivileged container job's user namespace "
      "maps onto (its ids 0..COUNT-1 are START..START+COUNT-1 here), like an /etc/subuid line; "
      "they must belong to pgfleet alone: hostd refuses a range holding a host account")(
      "cni-config", po::value(&f->cni_config),
      "directory of the CNI network configuration list network \"bridge\" jobs are attached "
      "to (its first *.conflist file in lexical order); default: a bridge pgfleet0 with NAT, "
      "host-local addresses from --bridge-subnet, portmap and firewall, written into the data "
      "directory (docs/networking.md)")(
      "cni-bin-dir", po::value(&f->cni_bin_dir),
      "directory of the CNI plugins (default /usr/lib/cni, then /opt/cni/bin); without them the "
      "host offers no bridge network and says why in pgfleet hosts")(
      "bridge-subnet", po::value(&f->bridge_subnet)->default_value(f->bridge_subnet),
      "IPv4 subnet of the default bridge network's addresses (CIDR, prefix length 8-30)")(
      "port-range", po::value(&f->port_range_text)->default_value(f->port_range_text),
      "LO-HI: the host ports jobs' named ports are given from (inclusive, 1024-65535)");
}

std::pair<int, int> ParsePortRange(const std::string& text) {
  auto bad = [&text](const std::string& rule) {
    return std::invalid_argument("--port-range must be LO-HI with " + rule + " (got \"" + text +
                                 "\")");
  };
  const size_t dash = text.find('-');
  if (dash == std::string::npos) throw bad("two port numbers");
  auto number = [&](const std::string& digits) {
    if (digits.empty() || digits.size() > 5 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      throw bad("two port numbers");
    }
    return std::stoi(digits);
  };
  const int lo = number(text.substr(0, dash)), hi = number(text.substr(dash + 1));
  if (lo < 1024 || hi > 65535) throw bad("both from 1024 to 65535");
  if (lo > hi) throw bad("LO <= HI");
  return {lo, hi};
}

std::string HostOfUrl(const std::string& url) {
  std::string rest = url;
  if (size_t scheme = rest.find("://"); scheme != std::string::npos) rest = rest.substr(scheme + 3);
  rest = rest.substr(0, rest.find('/'));
  if (size_t at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find(']');
    return close == std::string::npos ? "" : rest.substr(1, close - 1);
  }
  return rest.substr(0, rest.find(':'));
}

// Throws naming the flag, the value and the rule.
void ValidateHostdFlags(const std::string& id, HostdFlags* f) {
  if (f->simulate < 0)
    throw std::invalid_argument("--simulate must be >= 0 (got " + std::to_string(f->simulate) +
                                ")");
  if (f->simulate > 0 && !id.empty())
    throw std::invalid_argument("--id and --simulate exclude each other (use --id-prefix)");
  if (id.empty() && f->simulate == 0) throw std::invalid_argument("--id is required");
  if (f->cpu < 0)
    throw std::invalid_argument("--cpu must be > 0 (got " + std::to_string(f->cpu) + ")");
  if (f->memory < 0)
    throw std::invalid_argument("--memory must be > 0 (got " + std::to_string(f->memory) + ")");
  f->heartbeat = util::ParseSeconds("--heartbeat-interval", f->heartbeat_text);
  f->reconcile = util::ParseSeconds("--reconcile-interval", f->reconcile_text);
  f->host_ttl = util::ParseSeconds("--host-ttl", f->host_ttl_text);
  if (f->host_ttl <= f->heartbeat) {
    throw std::invalid_argument(fmt::format(
        "--host-ttl must be > --heartbeat-interval (got {:g} <= {:g})", f->host_ttl, f->heartbeat));
  }
  CheckFenceMargin(*f);
  // The same bounds as a job's own settings.
  auto bounded = [](const char* flag, int v, int lo, int hi) {
    if (v < lo || v > hi) {
      throw std::invalid_argument(
          fmt::format("{} must be between {} and {} (got {})", flag, lo, hi, v));
    }
  };
  bounded("--log-max-files", f->log_max_files, model::kMinLogMaxFiles, model::kMaxLogMaxFiles);
  bounded("--log-max-file-mb", f->log_max_file_mb, model::kMinLogMaxFileMb,
          model::kMaxLogMaxFileMb);
  bounded("--gc-disk-percent", f->gc_disk_percent, 1, 100);
  bounded("--disk-full-percent", f->disk_full_percent, 1, 100);
  f->gc_after = util::ParseDuration("--gc-after", f->gc_after_text);
  f->usage_interval = util::ParseSeconds("--usage-interval", f->usage_interval_text);
  if (f->usage_interval < 1 || f->usage_interval > 3600) {
    throw std::invalid_argument(
        fmt::format("--usage-interval must be between 1s and 1h (got {})", f->usage_interval_text));
  }
  ParseLogForward(f->log_forward);
  f->job_ids = ParseJobIdRange(f->job_ids_text);
  for (const auto& l : f->labels) f->label_map.insert(model::ParseKeyValue("--label", l));
  std::tie(f->port_lo, f->port_hi) = ParsePortRange(f->port_range_text);
  network::CheckBridgeSubnet(f->bridge_subnet);
  for (auto [flag, dir] :
       {std::pair{"--cni-config", &f->cni_config}, std::pair{"--cni-bin-dir", &f->cni_bin_dir}}) {
    if (!dir->empty() && (*dir)[0] != '/') {
      throw std::invalid_argument(std::string(flag) + " must be an absolute directory (got \"" +
                                  *dir + "\")");
    }
  }
}

}  // namespace pgfleet::hostd
