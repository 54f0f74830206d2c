// pgfleet quotas [--json]: each owner's quota (pgfleet.owner_quotas) beside
// what its assigned and running jobs take now (pgfleet.owner_quota_status;
// a submitter sees its own). Operators write quotas in SQL (docs/limits.md).

#include <iostream>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/queries.h"

namespace pgfleet::cli {
namespace {

// "1500 of 2000" (or "1500 of -" without a limit).
std::string OfLimit(const nlohmann::json& used, const nlohmann::json& limit) {
  return used.dump() + " of " + (limit.is_null() ? "-" : limit.dump());
}

}  // namespace

int CmdQuotas(const std::vector<std::string>& args) {
  Command cmd("pgfleet quotas", kListing);
  if (!cmd.Parse(args)) return kExitOk;
  auto conn = cmd.Connect();
  pqxx::work tx(*conn);
  auto rows = OwnerQuotas(tx);
  if (cmd.json()) {
    PrintJson(rows);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& q : rows) {
    table.push_back({q["owner"].get<std::string>(), OfLimit(q["cpu_in_use"], q["max_cpu"]),
                     OfLimit(q["memory_in_use"], q["max_memory"]),
                     OfLimit(q["running"], q["max_running"]), q["waiting"].dump()});
  }
  PrintTable({"OWNER", "CPU (m)", "MEMORY (MiB)", "RUNNING", "WAITING"}, table);
  return kExitOk;
}

}  // namespace pgfleet::cli
