// pgfleet-hostd: registers this machine, heartbeats, and runs the jobs the
// schedulers assign to it.

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <csignal>
#include <fstream>
#include <iostream>
#include <thread>

#include "core/db/connection.h"
#include "core/net/http.h"
#include "core/spec/job_spec.h"
#include "core/util/log.h"
#include "hostd/agent.h"
#include "hostd/api.h"
#include "hostd/drivers/driver.h"
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
         " [--driver container|process] [--cpu N] [--memory N] [--label k=v]... [--data-dir DIR]\n";
  return 2;
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
  po::options_description opts("pgfleet-hostd options");
  std::string db, id, listen, advertise, driver_name, token_file, data_dir, log_level;
  int cpu = 0, memory = 0;
  double heartbeat = 2.0, reconcile = 5.0;
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
    for (const auto& l : labels) label_map.insert(pgfleet::spec::ParseKeyValue("--label", l));
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
  std::unique_ptr<pgfleet::hostd::Driver> driver;
  try {
    driver = pgfleet::hostd::MakeDriver(driver_name, {data_dir, id});
  } catch (const std::exception& e) {
    return Usage(e.what());
  }
  if (driver_note.empty()) driver_note = "chosen with --driver " + driver_name;
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

  pgfleet::net::Metrics metrics;
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
  pgfleet::hostd::Agent agent(config, metrics);
  pgfleet::hostd::Supervisor supervisor(
      *driver, data_dir, id, [&agent](nlohmann::json r) { agent.Enqueue(std::move(r)); });
  agent.SetSupervisor(&supervisor);
  pgfleet::net::AddHealthAndMetrics(server, metrics, id);
  pgfleet::hostd::InstallApi(server, supervisor, agent, token, metrics);
  std::thread http([&server] { server.listen_after_bind(); });
  spdlog::info("host={} API on {} (advertised {}), data dir {}", id,
               listen.substr(0, colon) + ":" + std::to_string(port), advertise, data_dir);

  agent.Run(g_stop);
  server.stop();
  http.join();
  spdlog::info("host={} stopped; its jobs keep running", id);
  return 0;
}
