// pgfleet hosts | drain | host offline|online: listing hosts and the
// operator's controls over them.

#include <iostream>
#include <optional>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/queries.h"
#include "core/model/job_spec.h"
#include "core/util/text.h"

namespace pgfleet::cli {
namespace {

// The state `host WORD` sets, by the operator's word for it.
std::optional<std::string> HostStateFor(const std::string& word) {
  if (word == "offline") return "offline";
  if (word == "online") return "up";
  return std::nullopt;
}

// Writes what drain / host did: "HOST STATE" (and the drain deadline).
void PrintHostState(const std::string& host, const std::string& state,
                    const std::string& deadline) {
  std::cout << host << " " << state << (deadline.empty() ? "" : " (deadline in " + deadline + ")")
            << "\n";
}

}  // namespace

int CmdHosts(const std::vector<std::string>& args) {
  Command cmd("pgfleet hosts", kListing);
  if (!cmd.Parse(args)) return kExitOk;
  auto conn = cmd.Connect();
  pqxx::work tx(*conn);
  auto hosts = ListHosts(tx);
  if (cmd.json()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& h : hosts) out.push_back(nlohmann::json::parse(h.json));
    PrintJson(out);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& h : hosts) {
    table.push_back({h.id, h.shown_state, h.heartbeat_age + "s", h.cpu, h.memory, h.running_jobs,
                     h.cpu_used.empty() ? "-" : h.cpu_used,
                     h.memory_used.empty() ? "-" : h.memory_used, h.labels, h.driver, h.api_url,
                     h.driver_note, h.condition});
  }
  // FREE: not given to jobs; USED: what its running jobs use now (cores, memory).
  PrintTable({"ID", "STATE", "HEARTBEAT", "CPU FREE", "MEMORY FREE", "RUNNING", "CPU USED",
              "MEM USED", "LABELS", "DRIVER", "API", "DRIVER NOTE", "CONDITION"},
             table);
  return kExitOk;
}

int CmdDrain(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  std::string deadline;
  Command cmd("pgfleet drain HOST [--deadline 10m]", kText);
  cmd.Positional("args", &pos);
  cmd.Options()(
      "deadline", po::value(&deadline),
      "stop and requeue elsewhere the batch jobs still running after this long (90s, 10m, 2h)");
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.size() != 1) throw UsageError("expected exactly one HOST");
  const std::string& host = pos[0];
  std::optional<double> deadline_seconds;
  if (!deadline.empty()) {
    try {
      deadline_seconds =
          static_cast<double>(util::ParseDuration("--deadline", deadline, true).count());
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  auto conn = cmd.Connect();
  pqxx::work tx(*conn);
  DrainHost(tx, host, deadline_seconds);
  tx.commit();
  PrintHostState(host, "draining", deadline);
  return kExitOk;
}

int CmdHost(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  int cpu = 0, memory = 0;
  std::vector<std::string> labels;
  Command cmd("pgfleet host offline|online|remove|admit HOST", kText);
  cmd.Positional("args", &pos);
  cmd.Options()("cpu", po::value(&cpu), "admit: most millicores it may offer (default: what it declares)")(
      "memory", po::value(&memory), "admit: most MiB it may offer (default: what it declares)")(
      "label", po::value(&labels)->composing(),
      "admit: a label KEY=VALUE it may claim (repeatable; default: those it declares)");
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.size() == 2 && pos[0] == "admit") {
    std::optional<std::string> allowed;
    if (!labels.empty()) {
      nlohmann::json l = nlohmann::json::object();
      try {
        for (const auto& kv : labels) {
          auto [key, value] = model::ParseKeyValue("--label", kv);
          l[key] = value;
        }
      } catch (const model::SpecError& e) {
        throw UsageError(e.what());
      }
      allowed = l.dump();
    }
    auto given = [](int v, const char* flag) -> std::optional<int> {
      if (v < 0) throw UsageError(std::string(flag) + " must be > 0 (got " + std::to_string(v) + ")");
      return v == 0 ? std::nullopt : std::optional<int>(v);
    };
    std::optional<int> c = given(cpu, "--cpu"), m = given(memory, "--memory");
    auto conn = cmd.Connect();
    pqxx::work tx(*conn);
    AdmitHost(tx, pos[1], c, m, allowed);
    tx.commit();
    std::cout << pos[1] << " admitted\n";
    return kExitOk;
  }
  if (cpu != 0 || memory != 0 || !labels.empty()) {
    throw UsageError("--cpu, --memory and --label belong to: host admit HOST");
  }
  if (pos.size() == 2 && pos[0] == "remove") {
    auto conn = cmd.Connect();
    pqxx::work tx(*conn);
    RemoveHost(tx, pos[1]);
    tx.commit();
    std::cout << pos[1] << " removed\n";
    return kExitOk;
  }
  std::optional<std::string> state = pos.size() == 2 ? HostStateFor(pos[0]) : std::nullopt;
  if (!state) {
    throw UsageError(
        "expected: host offline HOST | host online HOST | host remove HOST | host admit HOST");
  }
  const std::string& host = pos[1];
  auto conn = cmd.Connect();
  pqxx::work tx(*conn);
  SetHostState(tx, host, *state);
  tx.commit();
  PrintHostState(host, *state, "");
  return kExitOk;
}

}  // namespace pgfleet::cli
