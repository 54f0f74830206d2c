// pgfleet-hostd: registers this machine, heartbeats, and runs the jobs the
// schedulers assign to it.
//
// main() first hands the shim commands (`pgfleet-hostd shim DIR`,
// `pgfleet-hostd shim-launcher ...`) to their own code, before any flag is
// read: the binary re-executes itself for them. Otherwise it reads the flags
// (the shared ones: core/daemon/flags.h), fills in what they leave to the
// machine, and wires Agent, Supervisor and the API to the HTTP listener and
// the stop signal. What each object does is in hostd/*.h, not here.

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "core/daemon/flags.h"
#include "core/daemon/http_listener.h"
#include "core/daemon/stop_signal.h"
#include "core/db/statements.h"
#include "core/model/job_spec.h"
#include "core/net/ticket.h"
#include "core/util/text.h"
#include "hostd/agent/agent.h"
#include "hostd/api/api.h"
#include "hostd/attempt/collector.h"
#include "hostd/attempt_runners.h"
#include "hostd/drivers/container/container.h"
#include "hostd/drivers/driver.h"
#include "hostd/drivers/driver_factory.h"
#include "hostd/fence/lease.h"
#include "hostd/health/health_monitor.h"
#include "hostd/hollow/hollow.h"
#include "hostd/hollow/sim.h"
#include "hostd/hostd_flags.h"
#include "hostd/host_networks.h"
#include "hostd/shim/shim.h"
#include "hostd/shim/shim_launcher.h"
#include "hostd/supervisor/supervisor.h"

namespace po = boost::program_options;
using pgfleet::hostd::AddHostdOptions;
using pgfleet::hostd::HostdFlags;
using pgfleet::hostd::HostdInfo;
using pgfleet::hostd::ValidateHostdFlags;

namespace {

int MachineMemoryMiB() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  long kb = 0;
  while (f >> key >> kb) {
    if (key == "MemTotal:") return static_cast<int>(kb / 1024);
    f.ignore(1024, '\n');
  }
  return 1024;
}

// hostd holds a descriptor per live job (it waits on each attempt
// directory's lock): make room for many jobs. Returns the soft limit it had,
// which shims and jobs get back (see SupervisorOptions::job_nofile).
uint64_t RaiseFileLimit() {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  uint64_t original = rl.rlim_cur;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  return original;
}

bool MakeDirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty()) mkdir(cur.c_str(), 0755);
    }
    if (i < path.size()) cur.push_back(path[i]);
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Stops the API in two steps. Begin closes the listening socket at once (in
// the background: httplib's stop then waits out requests in flight and idle
// keep-alive connections, up to 5 s), so the last heartbeat is not held up:
// no heartbeat renews the lease once hostd is stopping, and a long stop would
// spend the fence time a quick restart needs. Finish waits for that stop at
// most a second after Begin; what is still open then is cut by the exit.
class ApiStop {
 public:
  explicit ApiStop(pgfleet::daemon::HttpListener& http) : http_(http) {}
  void Begin() {
    auto stopped = std::make_shared<std::promise<void>>();
    done_ = stopped->get_future();
    deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    std::thread([&http = http_, stopped] {
      http.Stop();
      stopped->set_value();
    }).detach();
  }
  void Finish() {
    if (done_.valid() && done_.wait_until(deadline_) != std::future_status::ready)
      spdlog::info("hostd API: connections still open after 1 s are closed by the exit");
  }

 private:
  pgfleet::daemon::HttpListener& http_;
  std::future<void> done_;
  std::chrono::steady_clock::time_point deadline_;
};

// Fills in what the flags left to the machine (cpu, memory, data dir, driver)
// and checks it can be used. Returns an exit code when it cannot.
std::optional<int> ResolveMachineDefaults(const pgfleet::daemon::Flags& flags, HostdFlags* f) {
  const std::string& id = flags.common().id;
  if (f->cpu == 0) f->cpu = static_cast<int>(std::thread::hardware_concurrency()) * 1000;
  if (f->memory == 0) f->memory = MachineMemoryMiB();
  if (f->data_dir.empty()) f->data_dir = "pgfleet-data/" + id;
  if (!MakeDirs(f->data_dir))
    return flags.Usage("--data-dir " + f->data_dir + " cannot be created");
  if (f->data_dir[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd))) f->data_dir = std::string(cwd) + "/" + f->data_dir;
  }
  // Its cgroups are named under its data dir's scope (container.h).
  pgfleet::hostd::SetCgroupScope(f->data_dir);
  if (f->driver_name == "auto") f->driver_name = pgfleet::hostd::DefaultDriverName(&f->driver_note);
  // Each shim makes its own driver; hostd only checks this one can run here
  // (constructing one would, on destruction, tidy cgroups the shims share).
  const auto kind = pgfleet::model::ParseDriverKind(f->driver_name);
  if (!kind) {
    return flags.Usage("--driver must be container, process or sim (got \"" + f->driver_name +
                       "\")");
  }
  if (*kind == pgfleet::model::DriverKind::kContainer) {
    std::string why;
    if (!pgfleet::hostd::ContainerDriverAvailable(&why))
      return flags.Usage("--driver container cannot run here: " + why);
  }
  if (f->driver_note.empty()) f->driver_note = "chosen with --driver " + f->driver_name;
  return std::nullopt;
}

pgfleet::hostd::HostConfig MakeHostConfig(const pgfleet::daemon::CommonFlags& common,
                                          const HostdFlags& f) {
  pgfleet::hostd::HostConfig config;
  config.id = common.id;
  config.dsn = common.dsn;
  config.api_url = f.advertise;
  config.cpu = f.cpu;
  config.memory = f.memory;
  config.labels = f.label_map;
  config.driver = f.driver_name;
  config.driver_note = f.driver_note;
  config.heartbeat_interval = std::chrono::milliseconds(static_cast<int64_t>(f.heartbeat * 1000));
  config.reconcile_interval = std::chrono::milliseconds(static_cast<int64_t>(f.reconcile * 1000));
  config.self_fence = f.self_fence;
  config.shim_fence = f.shim_fence;
  config.data_dir = f.data_dir;
  config.disk_full_percent = f.disk_full_percent;
  config.usage_interval = std::chrono::milliseconds(static_cast<int64_t>(f.usage_interval * 1000));
  config.host_ttl = std::chrono::milliseconds(static_cast<int64_t>(f.host_ttl * 1000));
  config.port_lo = f.port_lo;
  config.port_hi = f.port_hi;
  return config;
}

pgfleet::hostd::HollowOptions MakeHollowOptions(const pgfleet::daemon::CommonFlags& common,
                                                const HostdFlags& f) {
  pgfleet::hostd::HollowOptions o;
  o.hosts = f.simulate;
  o.id_prefix = f.id_prefix;
  o.dsn = common.dsn;
  o.token = common.token;
  o.listen = common.listen;
  o.advertise = f.advertise;
  o.cpu = f.cpu > 0 ? f.cpu : o.cpu;
  o.memory = f.memory > 0 ? f.memory : o.memory;
  o.labels = f.label_map;
  o.heartbeat_interval = std::chrono::milliseconds(static_cast<int64_t>(f.heartbeat * 1000));
  o.reconcile_interval = std::chrono::milliseconds(static_cast<int64_t>(f.reconcile * 1000));
  o.host_ttl = std::chrono::milliseconds(static_cast<int64_t>(f.host_ttl * 1000));
  o.self_fence = f.self_fence;
  o.usage_interval = std::chrono::milliseconds(static_cast<int64_t>(f.usage_interval * 1000));
  o.db_connections = f.db_connections;
  return o;
}

// `--simulate N`: hollow hosts instead of this machine's one host.
int RunHollow(const pgfleet::daemon::Flags& flags, const HostdFlags& f) {
  if (!flags.common().tls.cert.empty()) {
    return flags.Usage(
        "--tls-cert is not supported with --simulate: hollow hosts serve plain HTTP");
  }
  auto options = MakeHollowOptions(flags.common(), f);
  try {
    pgfleet::hostd::CheckHollowOptions(options);
  } catch (const std::exception& e) {
    return flags.Usage(e.what());
  }
  const auto& stop = pgfleet::daemon::InstallStopSignals();
  pgfleet::metrics::Registry metrics;
  int code = pgfleet::hostd::RunHollowHosts(options, metrics, stop);
  spdlog::shutdown();
  return code;
}

// Refuses a --job-ids range that holds a host account's ids (drivers/driver.h
// JobIdRange), for drivers that map jobs' ids. Returns an exit code then.
std::optional<int> CheckJobIds(const pgfleet::daemon::Flags& flags, const HostdFlags& f) {
  if (!pgfleet::hostd::CapabilitiesOfDriver(f.driver_name).maps_job_ids) return std::nullopt;
  if (std::string taken = pgfleet::hostd::JobIdRangeConflict(f.job_ids); !taken.empty()) {
    return flags.Usage("--job-ids " + f.job_ids_text + " holds the host's " + taken +
                       ": give unprivileged jobs ids no host account has");
  }
  spdlog::info("host={} unprivileged container jobs run in user namespaces on host ids {}",
               flags.common().id, f.job_ids_text);
  return std::nullopt;
}

pgfleet::hostd::SupervisorOptions MakeSupervisorOptions(const std::string& id, const HostdFlags& f,
                                                        uint64_t job_nofile,
                                                        pgfleet::hostd::Collector* collector) {
  pgfleet::hostd::SupervisorOptions o;
  if (collector) {
    o.collected = [collector](int64_t job, int attempt, const std::string& uid) {
      auto found = collector->Find(job, &attempt);
      return found && (found->uid.empty() || uid.empty() || found->uid == uid);
    };
  }
  o.data_dir = f.data_dir;
  o.host_id = id;
  o.driver = f.driver_name;
  o.shim_binary = "/proc/self/exe";
  o.job_nofile = job_nofile;
  o.log_max_files = f.log_max_files;
  o.log_max_file_mb = f.log_max_file_mb;
  o.log_forward = f.log_forward;
  o.job_ids = f.job_ids;
  return o;
}

// Collects finished attempts in the background, never ending before _exit;
// at least every 10 s, so disk pressure is seen soon (a pass is a readdir
// and a stat per attempt directory).
void StartCollecting(pgfleet::hostd::Collector* collector, std::chrono::seconds gc_after,
                     const std::atomic<bool>& stop) {
  auto every = std::clamp<std::chrono::seconds>(gc_after / 2, std::chrono::seconds(1),
                                                std::chrono::seconds(10));
  std::thread([collector, every, &stop] {
    while (!stop) {
      collector->RunOnce();
      for (auto t = std::chrono::seconds(0); t < every && !stop; t += std::chrono::seconds(1)) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
  }).detach();
}

// Before the API and the reconcile: what a previous hostd left running is ours again.
void RecoverAttempts(pgfleet::hostd::Supervisor& supervisor, const std::string& id) {
  auto recovered = supervisor.Recover();
  spdlog::info(
      "host={} re-attached to {} running job(s); {} ended while hostd was away, {} lost; {} job "
      "cgroups left by gone shims removed",
      id, recovered.adopted, recovered.finished, recovered.lost, recovered.cgroups_removed);
}

// This machine's one host, until the stop signal; never returns normally
// (the shims' watcher threads outlive it: _exit).
int RunHost(const pgfleet::daemon::Flags& flags, HostdFlags& f) {
  if (auto failed = ResolveMachineDefaults(flags, &f)) return *failed;
  if (auto failed = CheckJobIds(flags, f)) return *failed;
  const std::string& id = flags.common().id;
  uint64_t job_nofile = RaiseFileLimit();
  spdlog::info("host={} driver={}: {}", id, f.driver_name, f.driver_note);

  const auto& stop = pgfleet::daemon::InstallStopSignals();
  pgfleet::daemon::HttpListener http;
  if (auto failed = http.Bind(flags)) return *failed;
  if (f.advertise.empty()) f.advertise = std::string(http.scheme()) + "://" + http.address();

  pgfleet::metrics::Registry metrics;
  pgfleet::hostd::HostConfig config = MakeHostConfig(flags.common(), f);
  try {
    config.ticket_key = pgfleet::net::LoadOrCreateKeyFile(f.data_dir + "/ticket.key");
  } catch (const std::exception& e) {
    spdlog::error("host={} {}", id, e.what());
    return 1;
  }
  const auto bridge = pgfleet::hostd::ResolveNetworks(id, f, &config);
  pgfleet::hostd::Agent agent(config, metrics);
  std::unique_ptr<pgfleet::hostd::Collector> collector;
  if (f.driver_name != pgfleet::hostd::kSimDriver) {
    collector = std::make_unique<pgfleet::hostd::Collector>(
        pgfleet::hostd::CollectorOptions{f.data_dir, f.gc_after, f.gc_disk_percent}, metrics);
  }
  auto sup_opts = MakeSupervisorOptions(id, f, job_nofile, collector.get());
  sup_opts.host_address = pgfleet::hostd::HostOfUrl(f.advertise);
  sup_opts.bridge = bridge;
  if (!config.network_note.empty()) sup_opts.bridge_missing = config.network_note;
  pgfleet::hostd::Supervisor supervisor(
      sup_opts, [&agent](pgfleet::model::Report r) { agent.Enqueue(std::move(r)); },
      pgfleet::hostd::MakeAttemptRunner(sup_opts));
  agent.SetSupervisor(&supervisor);
  supervisor.SetFenceAfter(f.self_fence && f.shim_fence
                               ? pgfleet::hostd::SelfFenceAfter(config.host_ttl)
                               : std::chrono::milliseconds(0));
  RecoverAttempts(supervisor, id);
  // Replicas' health checks (hostd/health/): sim jobs have no process to check.
  std::shared_ptr<pgfleet::hostd::health::HealthProber> prober;
  if (f.driver_name == pgfleet::hostd::kSimDriver) {
    prober = std::make_shared<pgfleet::hostd::SimProber>();
  } else {
    prober = std::make_shared<pgfleet::hostd::health::JobProber>(
        id, supervisor.capabilities().has_own_root);
  }
  pgfleet::hostd::health::HealthMonitor health_checks({&supervisor}, prober);
  health_checks.Start();
  if (!f.self_fence)
    spdlog::warn(
        "host={} self-fence is off: jobs keep running when the database is "
        "unreachable, even after schedulers may have replaced them",
        id);
  pgfleet::hostd::InstallApi(http.server(), supervisor, agent, flags.common().token, metrics,
                             &http.guard(), collector.get());
  if (collector) StartCollecting(collector.get(), f.gc_after, stop);
  http.Serve(metrics, id);
  spdlog::info("host={} API on {} (advertised {}), data dir {}", id, http.address(), f.advertise,
               f.data_dir);

  ApiStop api_stop(http);
  agent.Run(
      stop, [&api_stop] { api_stop.Begin(); }, [&api_stop] { api_stop.Finish(); });
  // Leave no per-host cgroup behind unless jobs still run in it (their
  // shims keep them running across a restart).
  supervisor.RemoveLeftoverCgroups();
  spdlog::info("host={} stopped; its jobs keep running under their shims", id);
  spdlog::shutdown();
  // Watcher threads block on shims that outlive us: leave without running the
  // destructors they use.
  std::fflush(nullptr);
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  // `pgfleet-hostd shim DIR`: the per-job supervisor hostd spawns (hostd/shim/shim.h).
  if (argc >= 2 && std::string(argv[1]) == "shim") pgfleet::hostd::RunShimCommand(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "shim-launcher")
    pgfleet::hostd::RunShimLauncher(argc, argv);

  pgfleet::daemon::Flags flags(HostdInfo());
  HostdFlags f;
  AddHostdOptions(flags.options(), &f);
  auto code = flags.Parse(
      argc, argv, [&](const po::variables_map&) { ValidateHostdFlags(flags.common().id, &f); });
  if (code) return *code;
  pgfleet::db::UseUnnamedStatements(f.db_pooled);
  if (f.simulate > 0) return RunHollow(flags, f);
  return RunHost(flags, f);
}
