// pgfleet migrate: creating or upgrading the schema (core/db/migrate.h).

#include <iostream>

#include "cli/command.h"
#include "core/db/migrate.h"

namespace pgfleet::cli {

int CmdMigrate(const std::vector<std::string>& args) {
  Command cmd("pgfleet migrate", kText);
  if (!cmd.Parse(args)) return kExitOk;
  auto conn = cmd.Connect();
  auto applied = db::Migrate(*conn);
  if (applied.empty()) {
    std::cout << "schema up to date; functions and views re-created\n";
  } else {
    for (const auto& a : applied) std::cout << "applied " << a << "\n";
  }
  return kExitOk;
}

}  // namespace pgfleet::cli
