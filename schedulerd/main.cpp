// pgfleet-schedulerd: places pending jobs on hosts. Run as many as you like;
// they share the work through per-formation advisory locks.
//
// main() only reads the flags (the shared ones: core/daemon/flags.h) and wires
// the Scheduler (scheduler.h) to the HTTP listener and the stop signal.

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <string>

#include "core/daemon/flags.h"
#include "core/daemon/http_listener.h"
#include "core/daemon/stop_signal.h"
#include "core/db/connection.h"
#include "core/util/text.h"
#include "schedulerd/scheduler.h"

namespace po = boost::program_options;

namespace {

std::string DefaultId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "-" + std::to_string(getpid());
}

}  // namespace

int main(int argc, char** argv) {
  // Its sessions say they are a scheduler's (pgfleet.formation_lock_holders).
  pgfleet::db::SetDaemonApplicationName("pgfleet-schedulerd");
  pgfleet::daemon::Flags flags(
      {"pgfleet-schedulerd", "schedulerd",
       "pgfleet-schedulerd --db DSN --token-file FILE [options]", "pgfleet-schedulerd options",
       "scheduler id (default: <hostname>-<pid>)", "address for /health and /metrics"});
  // Durations take one syntax everywhere (util::ParseSeconds): 500ms, 2s, 1.5, 10m, 2h, 7d.
  double tick = 1.0, host_ttl = 0;
  int batch = 500;
  std::string tick_text = "1s", host_ttl_text, retain = "7d", dispatch_timeout = "3s";
  flags.options().add_options()("tick", po::value(&tick_text)->default_value("1s"),
                                "time between safety-net passes over all formations")(
      "batch-size", po::value(&batch)->default_value(500),
      "pending jobs claimed per formation per transaction")(
      "host-ttl", po::value(&host_ttl_text),
      "time without heartbeat before a host is lost (default: settings host_ttl_seconds, 10 s)")(
      "retain", po::value(&retain)->default_value("7d"),
      "prune finished jobs older than this (90m, 12h, 7d)")(
      "dispatch-timeout", po::value(&dispatch_timeout)->default_value(dispatch_timeout),
      "how long a host has to answer a dispatch before its jobs are left to its reconcile and "
      "it is suspended (whole seconds, 1s to 5m)");
  pgfleet::schedulerd::Config config;
  auto code = flags.Parse(argc, argv, [&](const po::variables_map&) {
    tick = pgfleet::util::ParseSeconds("--tick", tick_text);
    if (!host_ttl_text.empty()) host_ttl = pgfleet::util::ParseSeconds("--host-ttl", host_ttl_text);
    if (batch <= 0)
      throw std::invalid_argument("--batch-size must be > 0 (got " + std::to_string(batch) + ")");
    config.retain =
        std::chrono::seconds(static_cast<int64_t>(pgfleet::util::ParseSeconds("--retain", retain)));
    double dt = pgfleet::util::ParseSeconds("--dispatch-timeout", dispatch_timeout);
    if (dt < 1 || dt > 300 || dt != static_cast<int>(dt)) {
      throw std::invalid_argument(
          "--dispatch-timeout must be whole seconds from 1s to 5m (got \"" + dispatch_timeout +
          "\")");
    }
    config.dispatch_timeout_seconds = static_cast<int>(dt);
  });
  if (code) return *code;

  const auto& common = flags.common();
  config.dsn = common.dsn;
  config.id = common.id.empty() ? DefaultId() : common.id;
  config.token = common.token;
  config.tick = std::chrono::milliseconds(static_cast<int64_t>(tick * 1000));
  config.batch_size = batch;
  config.host_ttl_seconds = host_ttl;

  const auto& stop = pgfleet::daemon::InstallStopSignals();
  pgfleet::metrics::Registry metrics;
  pgfleet::daemon::HttpListener http;
  if (auto failed = http.Bind(flags)) return *failed;
  http.Serve(metrics, config.id);
  spdlog::info("scheduler={} started, /health and /metrics on {}", config.id, http.address());
  config.metrics_url = std::string(http.scheme()) + "://" + http.address();

  pgfleet::schedulerd::Scheduler scheduler(config, metrics);
  scheduler.Run(stop);
  http.Stop();
  spdlog::info("scheduler={} stopped", config.id);
  return 0;
}
