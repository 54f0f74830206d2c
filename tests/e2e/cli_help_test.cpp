// Golden tests of the CLI's help (the first hour issue, item 11): each
// command's and subcommand's --help is exactly tests/golden/help/<name>.txt,
// lists only that command's own options, and never an internal one.
// After a deliberate change, regenerate the files with
//   PGFLEET_UPDATE_GOLDEN=1 scripts/test -R CliHelp
// and review the diff.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

struct HelpCase {
  std::string file;               // tests/golden/help/<file>.txt
  std::vector<std::string> args;  // after `pgfleet`
};

const std::vector<HelpCase>& Cases() {
  static const std::vector<HelpCase> cases = {
      {"pgfleet", {"--help"}},
      {"migrate", {"migrate", "--help"}},
      {"run", {"run", "--help"}},
      {"ps", {"ps", "--help"}},
      {"inspect", {"inspect", "--help"}},
      {"logs", {"logs", "--help"}},
      {"fs", {"fs", "--help"}},
      {"exec", {"exec", "--help"}},
      {"wait", {"wait", "--help"}},
      {"stop", {"stop", "--help"}},
      {"events", {"events", "--help"}},
      {"hosts", {"hosts", "--help"}},
      {"endpoints", {"endpoints", "--help"}},
      {"plan", {"plan", "--help"}},
      {"status", {"status", "--help"}},
      {"quotas", {"quotas", "--help"}},
      {"ui", {"ui", "--help"}},
      {"drain", {"drain", "--help"}},
      {"host", {"host", "--help"}},
      {"formation", {"formation", "--help"}},
      {"formation-create", {"formation", "create", "--help"}},
      {"formation-scale", {"formation", "scale", "--help"}},
      {"formation-done", {"formation", "done", "--help"}},
      {"formation-delete", {"formation", "delete", "--help"}},
      {"formation-list", {"formation", "list", "--help"}},
      {"formation-update", {"formation", "update", "--help"}},
      {"formation-status", {"formation", "status", "--help"}},
      {"formation-history", {"formation", "history", "--help"}},
      {"formation-revert", {"formation", "revert", "--help"}},
      {"formation-promote", {"formation", "promote", "--help"}},
  };
  return cases;
}

TEST(CliHelpTest, EveryHelpIsItsGoldenFileAndShowsNoInternalOption) {
  bool update = std::getenv("PGFLEET_UPDATE_GOLDEN") != nullptr;
  for (const auto& c : Cases()) {
    SCOPED_TRACE("pgfleet " + c.args[0] + (c.args.size() > 2 ? " " + c.args[1] : ""));
    std::vector<std::string> argv = {BinaryPath("pgfleet")};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    CommandResult r = pgfleet::testing::Run(argv);
    EXPECT_EQ(0, r.exit_code) << r.err;
    EXPECT_EQ("", r.err);
    std::string path = SourcePath("tests/golden/help/" + c.file + ".txt");
    if (update) {
      std::ofstream(path) << r.out;
      continue;
    }
    std::string golden;
    try {
      golden = util::ReadFile(path);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what() << " (PGFLEET_UPDATE_GOLDEN=1 makes it)";
      continue;
    }
    EXPECT_EQ(golden, r.out) << "help changed: review it, then PGFLEET_UPDATE_GOLDEN=1";
    // The words a command collects are named in its usage line, never
    // offered as options; the token is for commands that reach hosts' APIs.
    for (const char* internal : {"--args", "--job ", "--command", "--job\n"}) {
      // plan's --job is a real option (a pending job), not a collected word
      // (and the command list names it).
      if ((c.file == "plan" || c.file == "pgfleet") &&
          std::string(internal).rfind("--job", 0) == 0) {
        continue;
      }
      EXPECT_EQ(std::string::npos, r.out.find(internal)) << internal << " in\n" << r.out;
    }
    bool reads_logs = c.file == "logs" || c.file == "run" || c.file == "fs" || c.file == "exec";
    EXPECT_EQ(reads_logs, r.out.find("--token-file") != std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace pgfleet::testing
