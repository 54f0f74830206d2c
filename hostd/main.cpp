// pgfleet-hostd: registers this machine, heartbeats, and runs the jobs the
// schedulers assign to it.

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <csignal>
#include <fstream>
#include <iostream>
#include <thread>

#include "core/db/connection.h"
#include "core/net/http.h"
#include "core/model/job_spec.h"
#include "core/util/log.h"
#include "hostd/agent.h"
#include "hostd/api.h"
#include "hostd/drivers/container.h"
#include "hostd/drivers/driver.h"
#include "hostd/shim.h"
#include "hostd/shim_launcher.h"
#include "hostd/supervisor.h"

namespace po = boost::program_options;

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

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

int Usage(const std::string& msg) {
  std::cerr
      << "pgfleet-hostd: " << msg
      << "\nusage: pgfleet-hostd --db DSN --id ID --token-file FILE [--listen ADDR] [--advertise "
         "URL]"
         " [--driver container|process] [--cpu N] [--memory N] [--label k=v]... [--data-dir DIR]"
         " [--host-ttl S] [--self-fence=true|false] [--self-fence-shims]\n";
  return 2;
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

}  // namespace

int main(int argc, char** argv) {
  // `pgfleet-hostd shim DIR`: the per-job supervisor hostd spawns (hostd/shim.h).
  if (argc >= 2 && std::string(argv[1]) == "shim") pgfleet::hostd::RunShimCommand(argc, argv);
  if (argc >= 2 && std::string(argv[1]) == "shim-launcher")
    pgfleet::hostd::RunShimLauncher(argc, argv);

  po::options_description opts(
      "pgfleet-hostd options (each job runs under `pgfleet-hostd shim DIR`, a per-job process\n"
      "hostd starts itself: jobs keep running across hostd restarts; docs/failures-hostd.md)");
  std::string db, id, listen, advertise, driver_name, token_file, data_dir, log_level;
  int cpu = 0, memory = 0;
  double heartbeat = 2.0, reconcile = 5.0;
  double host_ttl = pgfleet::hostd::kDefaultHostTtlMs / 1000.0;
  bool self_fence = true, shim_fence = false;
  std::vector<std::string> labels;
  opts.add_options()("help,h", "show this help")(
      "db", po::value(&db), "PostgreSQL connection string (else $PGFLEET_DB, else PG* variables)")(
      "id", po::value(&id), "host id (required)")("listen",
                                                  po::value(&listen)->default_value("127.0.0.1:0"),
                                                  "API address HOST:PORT (port 0: any free port)")(
      "advertise", po::value(&advertise),
      "URL schedulers use to reach this host (default http://<listen>)")(
      "driver", po::value(&driver_name)->default_value("auto"), "container, process, or auto")(
      "cpu", po::value(&cpu)->default_value(0), "millicores offered (default: all cores x 1000)")(
      "memory", po::value(&memory)->default_value(0),
      "MiB offered (default: the machine's memory)")(
      "label", po::value(&labels)->composing(), "label KEY=VALUE for job constraints (repeatable)")(
      "heartbeat-interval", po::value(&heartbeat)->default_value(2.0),
      "seconds between heartbeats")("reconcile-interval", po::value(&reconcile)->default_value(5.0),
                                    "seconds between reconciles with the database")(
      "host-ttl", po::value(&host_ttl)->default_value(host_ttl),
      "seconds without a heartbeat after which schedulers declare this host lost; must match "
      "the database's settings.host_ttl_seconds (the shorter of the two is used)")(
      "self-fence", po::value(&self_fence)->default_value(true)->implicit_value(true),
      "SIGKILL every job when no heartbeat has succeeded for host-ttl (less a 0.5 s margin), "
      "so a cut-off host never runs a job next to its replacement; --self-fence=false keeps "
      "jobs running through database outages instead")(
      "self-fence-shims", po::value(&shim_fence)->default_value(false)->implicit_value(true),
      "also have each job's shim SIGKILL its job at the same deadline, so the guarantee holds "
      "while hostd itself is down or hung (default: a dead hostd leaves its jobs running until it "
      "is back; its reconcile then kills the superseded ones)")(
      "data-dir", po::value(&data_dir),
      "directory for job logs and state (default ./pgfleet-data/<id>)")(
      "token-file", po::value(&token_file), "file holding the cluster token (required)")(
      "log-level", po::value(&log_level)->default_value("info"), "trace, debug, info, warn, error")(
      "config", po::value<std::string>(), "config file with the same option names (name = value)");
  po::variables_map vm;
  std::map<std::string, std::string> label_map;
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    if (vm.count("config")) {
      std::ifstream f(vm["config"].as<std::string>());
      if (!f) throw std::runtime_error("cannot read --config " + vm["config"].as<std::string>());
      po::store(po::parse_config_file(f, opts), vm);
    }
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << opts << "\n";
      return 0;
    }
    if (id.empty()) throw std::invalid_argument("--id is required");
    if (cpu < 0) throw std::invalid_argument("--cpu must be > 0 (got " + std::to_string(cpu) + ")");
    if (memory < 0)
      throw std::invalid_argument("--memory must be > 0 (got " + std::to_string(memory) + ")");
    if (heartbeat <= 0) throw std::invalid_argument("--heartbeat-interval must be > 0");
    if (reconcile <= 0) throw std::invalid_argument("--reconcile-interval must be > 0");
    if (host_ttl <= heartbeat) {
      throw std::invalid_argument(fmt::format(
          "--host-ttl must be > --heartbeat-interval (got {:g} <= {:g})", host_ttl, heartbeat));
    }
    for (const auto& l : labels) label_map.insert(pgfleet::model::ParseKeyValue("--label", l));
  } catch (const std::exception& e) {
    return Usage(e.what());
  }
  try {
    pgfleet::util::SetupLogging("hostd", log_level);
  } catch (const std::exception& e) {
    return Usage(e.what());
  }
  std::string token;
  try {
    token = pgfleet::net::ReadTokenFile(token_file);
  } catch (const std::exception& e) {
    return Usage(e.what());
  }
  if (cpu == 0) cpu = static_cast<int>(std::thread::hardware_concurrency()) * 1000;
  if (memory == 0) memory = MachineMemoryMiB();
  if (data_dir.empty()) data_dir = "pgfleet-data/" + id;
  if (!MakeDirs(data_dir)) return Usage("--data-dir " + data_dir + " cannot be created");
  if (data_dir[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd))) data_dir = std::string(cwd) + "/" + data_dir;
  }

  std::string driver_note;
  if (driver_name == "auto") driver_name = pgfleet::hostd::DefaultDriverName(&driver_note);
  // Each shim makes its own driver; hostd only checks this one can run here
  // (constructing one would, on destruction, tidy cgroups the shims share).
  if (driver_name == "container") {
    std::string why;
    if (!pgfleet::hostd::ContainerDriverAvailable(&why))
      return Usage("--driver container cannot run here: " + why);
  } else if (driver_name != "process") {
    return Usage("--driver must be container or process (got \"" + driver_name + "\")");
  }
  if (driver_note.empty()) driver_note = "chosen with --driver " + driver_name;
  uint64_t job_nofile = RaiseFileLimit();
  spdlog::info("host={} driver={}: {}", id, driver_name, driver_note);

  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);

  httplib::Server server;
  auto colon = listen.rfind(':');
  if (colon == std::string::npos)
    return Usage("--listen must be HOST:PORT (got \"" + listen + "\")");
  std::string lhost = listen.substr(0, colon);
  int port;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
    return Usage("--listen port must be a number (got \"" + listen + "\")");
  }
  if (port == 0)
    port = server.bind_to_any_port(lhost);
  else if (!server.bind_to_port(lhost, port))
    port = -1;
  if (port < 0) {
    spdlog::error("host={} cannot listen on {}", id, listen);
    return 1;
  }
  if (advertise.empty()) advertise = "http://" + lhost + ":" + std::to_string(port);

  pgfleet::metrics::Registry metrics;
  pgfleet::hostd::HostConfig config;
  config.id = id;
  config.dsn = pgfleet::db::ResolveDsn(db);
  config.api_url = advertise;
  config.cpu = cpu;
  config.memory = memory;
  config.labels = label_map;
  config.driver = driver_name;
  config.driver_note = driver_note;
  config.heartbeat_interval = std::chrono::milliseconds(static_cast<int64_t>(heartbeat * 1000));
  config.reconcile_interval = std::chrono::milliseconds(static_cast<int64_t>(reconcile * 1000));
  config.self_fence = self_fence;
  config.shim_fence = shim_fence;
  config.data_dir = data_dir;
  config.host_ttl = std::chrono::milliseconds(static_cast<int64_t>(host_ttl * 1000));
  pgfleet::hostd::Agent agent(config, metrics);
  pgfleet::hostd::SupervisorOptions sup_opts;
  sup_opts.data_dir = data_dir;
  sup_opts.host_id = id;
  sup_opts.driver = driver_name;
  sup_opts.shim_binary = "/proc/self/exe";
  sup_opts.job_nofile = job_nofile;
  pgfleet::hostd::Supervisor supervisor(
      sup_opts, [&agent](pgfleet::model::Report r) { agent.Enqueue(std::move(r)); });
  agent.SetSupervisor(&supervisor);
  supervisor.SetFenceAfter(self_fence && shim_fence
                               ? pgfleet::hostd::SelfFenceAfter(config.host_ttl)
                               : std::chrono::milliseconds(0));
  // Before the API and the reconcile: what a previous hostd left running is ours again.
  auto recovered = supervisor.Recover();
  spdlog::info("host={} re-attached to {} running job(s); {} ended while hostd was away, {} lost",
               id, recovered.adopted, recovered.finished, recovered.lost);
  if (!self_fence)
    spdlog::warn(
        "host={} self-fence is off: jobs keep running when the database is "
        "unreachable, even after schedulers may have replaced them",
        id);
  pgfleet::net::AddHealthAndMetrics(server, metrics, id);
  pgfleet::hostd::InstallApi(server, supervisor, agent, token, metrics);
  std::thread http([&server] { server.listen_after_bind(); });
  spdlog::info("host={} API on {} (advertised {}), data dir {}", id,
               listen.substr(0, colon) + ":" + std::to_string(port), advertise, data_dir);

  agent.Run(g_stop);
  server.stop();
  http.join();
  if (driver_name == "container") {
    // What a driver's destructor does: drop the per-host cgroup if no job is
    // left in it (shims never do; they share it).
    try {
      pgfleet::hostd::MakeDriver(driver_name, {data_dir, id}).reset();
    } catch (const std::exception&) {
    }
  }
  spdlog::info("host={} stopped; its jobs keep running under their shims", id);
  spdlog::shutdown();
  // Watcher threads block on shims that outlive us: leave without running the
  // destructors they use.
  std::fflush(nullptr);
  _exit(0);
}
