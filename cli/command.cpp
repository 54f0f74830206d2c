#include "cli/command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "cli/local_files.h"
#include "cli/output.h"
#include "cli/queries.h"
#include "core/db/connection.h"
#include "core/net/http.h"

namespace pgfleet::cli {

Command::Command(const std::string& usage, Output output) : opts_(usage), output_(output) {}

void Command::Positional(const char* name, std::vector<std::string>* out) {
  if (positional_) throw std::logic_error("Command::Positional called twice");
  positional_ = name;
  hidden_.add_options()(name, po::value(out)->composing(), "");
}

bool Command::Parse(const std::vector<std::string>& args) {
  opts_.add_options()("db", po::value(&db_),
                      "PostgreSQL connection string (else $PGFLEET_DB, else PG* variables)");
  if (reads_host_logs_) {
    opts_.add_options()("token-file", po::value(&token_file_),
                        "cluster token for the hosts' APIs (else $PGFLEET_TOKEN_FILE); "
                        "without one, a ticket from the database");
  }
  bool raw = false;
  if (output_ == kListing) {
    opts_.add_options()("json", po::bool_switch(&json_), "print JSON instead of a table")(
        "raw", po::bool_switch(&raw),
        "print values as stored, control characters included (to a pipe or file only; on a "
        "terminal they are shown as \\xNN)");
  }
  opts_.add_options()("help,h", "show this help");
  try {
    po::positional_options_description pos;
    if (positional_) pos.add(positional_, -1);
    po::options_description all;
    all.add(opts_).add(hidden_);
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm_);
    po::notify(vm_);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  if (raw) {
    // A value a job or a submitter wrote must never reach a terminal as
    // control characters (they move the cursor, retitle the window).
    if (isatty(STDOUT_FILENO)) {
      throw UsageError(
          "--raw writes control characters as they are: only to a pipe or a file, not to a "
          "terminal");
    }
    SetRawOutput(true);
  }
  if (!Given("help")) return true;
  std::cout << opts_ << "\n";
  return false;
}

std::string Command::GivenOtherThan(const std::vector<std::string>& except) const {
  for (const auto& [name, value] : vm_) {
    if (value.defaulted() || name == "db" || name == "token-file" || name == "json" ||
        name == "raw" || (positional_ && name == positional_)) {
      continue;
    }
    if (std::find(except.begin(), except.end(), name) == except.end()) return name;
  }
  return "";
}

std::unique_ptr<pqxx::connection> Command::Connect() const {
  auto conn = db::Connect(db::ResolveDsn(db_));
  PrepareQueries(*conn);
  return conn;
}

std::string Command::TokenOrEmpty() const {
  std::string path = token_file_;
  if (path.empty()) {
    if (const char* env = std::getenv("PGFLEET_TOKEN_FILE")) path = env;
  }
  if (path.empty()) return "";
  return net::ReadTokenFile(path);
}

std::pair<std::vector<std::string>, std::vector<std::string>> SplitAtDoubleDash(
    const std::vector<std::string>& args) {
  std::pair<std::vector<std::string>, std::vector<std::string>> out;
  bool after = false;
  for (const auto& a : args) {
    if (!after && a == "--") {
      after = true;
      continue;
    }
    (after ? out.second : out.first).push_back(a);
  }
  return out;
}

void AddJobTemplateOptions(Command& cmd, model::JobSpec* spec, std::vector<std::string>* envs,
                           std::vector<std::string>* constraints, std::vector<std::string>* ports,
                           HealthFlags* health) {
  model::JobSpec& s = *spec;
  s.network.clear();  // unless given, the database's default (pgfleet.default_network)
  cmd.Options()("cpu", po::value(&s.cpu), "CPU in millicores (default 100)")(
      "memory", po::value(&s.memory), "memory limit in MiB (default 64)")(
      "constraint", po::value(constraints)->composing(),
      "host label KEY=VALUE required (repeatable)")("env", po::value(envs)->composing(),
                                                    "environment KEY=VALUE (repeatable)")(
      "priority", po::value(&s.priority), "0-100 (default 50)")(
      "rootfs", po::value(&s.rootfs), "container root filesystem (directory or name)")(
      "user", po::value(&s.user), "user to run as (container default: nobody)")(
      "network", po::value(&s.network),
      "host, none or bridge (default: host for members of pgfleet_privileged, else none)")(
      "port", po::value(ports)->composing(),
      "named port NAME=PORT the job listens on, 0 for any free port of its host (repeatable; "
      "the job sees PGFLEET_PORT_NAME)")(
      "pids-max", po::value(&s.pids_max), "maximum processes (default 1024)")(
      "seccomp", po::value(&s.seccomp),
      "default (the default seccomp filter) or unconfined (members of pgfleet_privileged only)")(
      "disk", po::value(&s.disk),
      "MiB of the job's writable work dir, a filesystem of its own (default 0: no limit)")(
      "cpu-hard-limit", po::bool_switch(&s.cpu_hard_limit), "cap CPU at --cpu, not just share it")(
      "stop-grace", po::value(&s.stop_grace_seconds),
      "seconds from SIGTERM to SIGKILL (default 10)")(
      "file", po::value<std::vector<std::string>>()->composing()->notifier(
                  [spec](const std::vector<std::string>& words) {
                    for (const auto& w : words) AddLocalFile(w, &spec->files);
                  }),
      "LOCAL[:PATH[:MODE]]: put local file LOCAL in the job's work dir at PATH (default: its "
      "name) with octal MODE (default 0755 if LOCAL is executable, else 0644); repeatable, 1 MiB "
      "in all");
  HealthFlags& h = *health;
  cmd.Options()("health-cmd", po::value(&h.cmd),
                "health check: a command run inside the job, passing on exit 0 (words split at "
                "spaces, or a JSON array)")("health-http", po::value(&h.http),
                                            "health check: HTTP GET of PORT[/PATH] on the job's "
                                            "loopback, passing on 2xx or 3xx")(
      "health-tcp", po::value(&h.tcp), "health check: a TCP connect to PORT on the job's loopback")(
      "health-interval", po::value<int>()->notifier([&h](int v) { h.interval = v; }),
      "seconds between health checks (default 10)")(
      "health-timeout", po::value<int>()->notifier([&h](int v) { h.timeout = v; }),
      "seconds a health check may take (default 2)")(
      "health-threshold", po::value<int>()->notifier([&h](int v) { h.threshold = v; }),
      "failed checks in a row that make it unhealthy and restart it (default 3)")(
      "health-grace", po::value<int>()->notifier([&h](int v) { h.grace = v; }),
      "seconds after the start without checks (default 0)");
}

namespace {

// The check the --health-* flags ask for, or none. Throws model::SpecError.
std::optional<model::HealthCheck> HealthCheckOf(const HealthFlags& h) {
  const int given = !h.cmd.empty() + !h.http.empty() + (h.tcp != 0);
  if (given == 0) {
    if (h.interval || h.timeout || h.threshold || h.grace) {
      throw model::SpecError("health_check",
                             "--health-interval, --health-timeout, --health-threshold and "
                             "--health-grace need --health-cmd, --health-http or --health-tcp");
    }
    return std::nullopt;
  }
  if (given > 1) {
    throw model::SpecError("health_check",
                           "give one of --health-cmd, --health-http and --health-tcp");
  }
  nlohmann::json j = nlohmann::json::object();
  if (!h.cmd.empty()) {
    j["type"] = "command";
    if (h.cmd[0] == '[') {
      try {
        j["command"] = nlohmann::json::parse(h.cmd);
      } catch (const nlohmann::json::exception&) {
        throw model::SpecError("health_check.command",
                               "--health-cmd starting with [ must be a JSON array of strings");
      }
    } else {
      std::vector<std::string> words;
      std::istringstream in(h.cmd);
      for (std::string w; in >> w;) words.push_back(w);
      j["command"] = words;
    }
  } else if (!h.http.empty()) {
    j["type"] = "http";
    const size_t slash = h.http.find('/');
    const std::string port = h.http.substr(0, slash);
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos) {
      throw model::SpecError("health_check.port",
                             "--health-http must be PORT[/PATH] (got \"" + h.http + "\")");
    }
    j["port"] = std::stoi(port);
    if (slash != std::string::npos) j["path"] = h.http.substr(slash);
  } else {
    j["type"] = "tcp";
    j["port"] = h.tcp;
  }
  if (h.interval) j["interval_seconds"] = *h.interval;
  if (h.timeout) j["timeout_seconds"] = *h.timeout;
  if (h.threshold) j["failure_threshold"] = *h.threshold;
  if (h.grace) j["grace_seconds"] = *h.grace;
  return model::ParseHealthCheck(j);
}

}  // namespace

void CompleteSpec(const std::vector<std::string>& envs, const std::vector<std::string>& constraints,
                  const std::vector<std::string>& ports, const HealthFlags& health,
                  model::JobSpec* spec) {
  try {
    spec->health_check = HealthCheckOf(health);
    for (const auto& p : ports) {
      auto [name, number] = model::ParseKeyValue("--port", p);
      if (spec->ports.count(name)) {
        throw model::SpecError("ports", "--port " + name + " is given twice");
      }
      if (number.empty() || number.size() > 5 ||
          number.find_first_not_of("0123456789") != std::string::npos) {
        throw model::SpecError("ports", "--port " + name +
                                            " must be a whole number from 0 to 65535 (got \"" +
                                            number + "\")");
      }
      spec->ports[name] = std::stoi(number);
    }
    for (const auto& e : envs) spec->env.insert(model::ParseKeyValue("--env", e));
    for (const auto& c : constraints) {
      spec->constraints.insert(model::ParseKeyValue("--constraint", c));
    }
    // An empty network means "the database's default"; the rest of the spec
    // is checked as it stands.
    model::JobSpec checked = *spec;
    if (checked.network.empty()) checked.network = "none";
    model::Validate(checked);
  } catch (const model::SpecError& e) {
    throw UsageError(e.what());
  }
}

int64_t ParseJobId(const std::string& s) {
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used == s.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("JOB must be a positive integer job id (got \"" + s + "\")");
}

}  // namespace pgfleet::cli
