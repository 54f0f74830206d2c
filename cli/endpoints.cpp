// pgfleet endpoints [FORMATION] [--json] [--watch]: where running jobs
// listen (pgfleet.endpoints). --watch follows: after the table, one line
// per endpoint that appears, changes (its health) or goes, woken by
// LISTEN pgfleet_endpoints (pgfleet.watch_endpoints) and a re-read every
// few seconds for what no notification covers.

#include <chrono>
#include <iostream>
#include <map>
#include <tuple>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/queries.h"
#include "core/model/constants.h"

namespace pgfleet::cli {
namespace {

constexpr std::chrono::seconds kRecheck{3};

class Wakeups : public pqxx::notification_receiver {
 public:
  explicit Wakeups(pqxx::connection_base& conn)
      : pqxx::notification_receiver(conn, model::kEndpointsChannel) {}
  void operator()(const std::string&, int) override {}
};

// What names an endpoint across reads: its attempt and port name.
using Key = std::tuple<int64_t, int, std::string>;

Key KeyOf(const EndpointRow& e) { return {e.job, e.attempt, e.port_name}; }

std::string HostPort(const EndpointRow& e) {
  if (e.port.empty()) return "-";
  return (e.address.find(':') != std::string::npos ? "[" + e.address + "]" : e.address) + ":" +
         e.port;
}

std::vector<std::string> Cells(const EndpointRow& e) {
  return {e.formation,
          std::to_string(e.job),
          e.port_name.empty() ? "-" : e.port_name,
          HostPort(e),
          e.job_address.empty() ? "-" : e.job_address + (e.port.empty() ? "" : ":" + e.port),
          e.host,
          e.health,
          e.since};
}

const std::vector<std::string> kHeader = {"FORMATION", "JOB",  "NAME",   "HOST ADDRESS",
                                          "JOB ADDRESS", "HOST", "HEALTH", "SINCE"};

// One line of --watch: "+ web 12 http 127.0.0.1:20001 ... healthy".
void PrintChange(const char* what, const EndpointRow& e, bool as_json) {
  if (as_json) {
    std::cout << nlohmann::json{{"event", what}, {"endpoint", nlohmann::json::parse(e.json)}}.dump()
              << std::endl;
    return;
  }
  std::string line = what;
  for (const auto& c : Cells(e)) line += " " + Printable(c);  // no terminal escapes
  std::cout << line << std::endl;
}

}  // namespace

int CmdEndpoints(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  bool watch = false;
  Command cmd("pgfleet endpoints [FORMATION] [--watch]", kListing);
  cmd.Positional("formation", &pos);
  cmd.Options()("watch", po::bool_switch(&watch),
                "then follow: a line per endpoint that appears (+), changes health (~) or goes "
                "(-); with --json, one JSON object per line");
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.size() > 1) throw UsageError("expected at most one FORMATION");
  const std::string formation = pos.empty() ? "" : pos[0];

  auto conn = cmd.Connect();
  std::optional<Wakeups> wakeups;
  if (watch) {
    wakeups.emplace(*conn);  // LISTEN before reading: no change falls in between
    pqxx::work tx(*conn);
    WatchEndpoints(tx, formation);
    tx.commit();
  }
  std::vector<EndpointRow> rows;
  {
    pqxx::work tx(*conn);
    rows = ListEndpoints(tx, formation);
    tx.commit();
  }
  if (cmd.json() && !watch) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : rows) out.push_back(nlohmann::json::parse(e.json));
    PrintJson(out);
    return kExitOk;
  }
  if (!cmd.json()) {
    std::vector<std::vector<std::string>> table;
    for (const auto& e : rows) table.push_back(Cells(e));
    PrintTable(kHeader, table);
    std::cout.flush();  // a --watch's reader sees the table before the first change
  }
  if (!watch) return kExitOk;

  std::map<Key, EndpointRow> shown;
  for (auto& e : rows) {
    if (cmd.json()) PrintChange("+", e, true);
    shown.emplace(KeyOf(e), std::move(e));
  }
  while (true) {
    conn->await_notification(kRecheck.count(), 0);
    std::map<Key, EndpointRow> now;
    {
      pqxx::work tx(*conn);
      for (auto& e : ListEndpoints(tx, formation)) now.emplace(KeyOf(e), std::move(e));
      tx.commit();
    }
    for (const auto& [key, e] : shown) {
      if (!now.count(key)) PrintChange("-", e, cmd.json());
    }
    for (const auto& [key, e] : now) {
      auto it = shown.find(key);
      if (it == shown.end()) {
        PrintChange("+", e, cmd.json());
      } else if (it->second.health != e.health || it->second.port != e.port ||
                 it->second.job_address != e.job_address) {
        PrintChange("~", e, cmd.json());
      }
    }
    shown = std::move(now);
  }
}

}  // namespace pgfleet::cli
