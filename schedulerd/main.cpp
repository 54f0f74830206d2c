// pgfleet-schedulerd: places pending jobs on hosts. Run as many as you like;
// they share the work through per-formation advisory locks.

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <csignal>
#include <fstream>
#include <iostream>
#include <thread>

#include "core/db/connection.h"
#include "core/net/http.h"
#include "core/util/log.h"
#include "core/util/text.h"
#include "schedulerd/scheduler.h"

namespace po = boost::program_options;

namespace {
std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  po::options_description opts("pgfleet-schedulerd options");
  std::string db, id, listen, token_file, config_file, log_level;
  double tick = 1.0, host_ttl = 0;
  int batch = 500;
  std::string retain = "7d";
  opts.add_options()("help,h", "show this help")(
      "db", po::value(&db), "PostgreSQL connection string (else $PGFLEET_DB, else PG* variables)")(
      "id", po::value(&id), "scheduler id (default: <hostname>-<pid>)")(
      "listen", po::value(&listen)->default_value("127.0.0.1:0"),
      "address for /health and /metrics")("token-file", po::value(&token_file),
                                          "file holding the cluster token (required)")(
      "tick", po::value(&tick)->default_value(1.0),
      "seconds between safety-net passes over all formations")(
      "batch-size", po::value(&batch)->default_value(500),
      "pending jobs claimed per formation per transaction")(
      "host-ttl", po::value(&host_ttl),
      "seconds without heartbeat before a host is lost (default: settings host_ttl_seconds, 10)")(
      "retain", po::value(&retain)->default_value("7d"),
      "prune finished jobs older than this (90m, 12h, 7d)")(
      "log-level", po::value(&log_level)->default_value("info"), "trace, debug, info, warn, error")(
      "config", po::value(&config_file), "config file with the same option names (name = value)");
  po::variables_map vm;
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
    if (tick <= 0)
      throw std::invalid_argument("--tick must be > 0 (got " + std::to_string(tick) + ")");
    if (batch <= 0)
      throw std::invalid_argument("--batch-size must be > 0 (got " + std::to_string(batch) + ")");
  } catch (const std::exception& e) {
    std::cerr << "pgfleet-schedulerd: " << e.what()
              << "\nusage: pgfleet-schedulerd --db DSN --token-file FILE [options]\n";
    return 2;
  }

  try {
    pgfleet::util::SetupLogging("schedulerd", log_level);
  } catch (const std::exception& e) {
    std::cerr << "pgfleet-schedulerd: " << e.what() << "\n";
    return 2;
  }
  if (id.empty()) {
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    id = std::string(host) + "-" + std::to_string(getpid());
  }
  pgfleet::schedulerd::Config config;
  config.dsn = pgfleet::db::ResolveDsn(db);
  config.id = id;
  config.tick = std::chrono::milliseconds(static_cast<int64_t>(tick * 1000));
  config.batch_size = batch;
  config.host_ttl_seconds = host_ttl;
  try {
    config.retain = pgfleet::util::ParseDuration("--retain", retain);
  } catch (const std::exception& e) {
    std::cerr << "pgfleet-schedulerd: " << e.what() << "\n";
    return 2;
  }
  try {
    config.token = pgfleet::net::ReadTokenFile(token_file);
  } catch (const std::exception& e) {
    std::cerr << "pgfleet-schedulerd: " << e.what() << "\n";
    return 2;
  }

  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);

  pgfleet::metrics::Registry metrics;
  httplib::Server server;
  pgfleet::net::AddHealthAndMetrics(server, metrics, id);
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    std::cerr << "pgfleet-schedulerd: --listen must be HOST:PORT (got \"" << listen << "\")\n";
    return 2;
  }
  std::string lhost = listen.substr(0, colon);
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (const std::exception&) {
    std::cerr << "pgfleet-schedulerd: --listen port must be a number (got \"" << listen << "\")\n";
    return 2;
  }
  if (port == 0)
    port = server.bind_to_any_port(lhost);
  else if (!server.bind_to_port(lhost, port))
    port = -1;
  if (port < 0) {
    std::cerr << "pgfleet-schedulerd: cannot listen on " << listen << "\n";
    return 1;
  }
  std::thread http([&server] { server.listen_after_bind(); });
  spdlog::info("scheduler={} started, /health and /metrics on {}:{}", id, lhost, port);

  pgfleet::schedulerd::Scheduler scheduler(config, metrics);
  scheduler.Run(g_stop);
  server.stop();
  http.join();
  spdlog::info("scheduler={} stopped", id);
  return 0;
}
