// The CLI's database errors read as messages for people: no PL/pgSQL
// CONTEXT lines, and a database pgfleet was never set up in says to run
// `pgfleet migrate` (the first hour issue, item 11).

#include <gtest/gtest.h>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

TEST(CliErrorsTest, AnUnmigratedDatabaseSaysToRunMigrate) {
  TestDatabase db(false);
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"ps"}, {"status"}, {"run", "--", "true"}, {"stop", "1"}}) {
    // --db right after the command: for run, what follows "--" is the job's.
    args.insert(args.begin() + 1, {"--db", db.dsn()});
    args.insert(args.begin(), BinaryPath("pgfleet"));
    auto r = testing::Run(args, {}, 30s);
    EXPECT_EQ(1, r.exit_code) << args[1] << ": " << r.err;
    EXPECT_NE(std::string::npos, r.err.find("run `pgfleet migrate` first"))
        << args[1] << ": " << r.err;
  }
}

TEST(CliErrorsTest, ErrorsRaisedInsidePgfleetsFunctionsShowNoContextLines) {
  TestDatabase db;
  auto r = testing::Run({BinaryPath("pgfleet"), "stop", "424242", "--db", db.dsn()}, {}, 30s);
  EXPECT_EQ(1, r.exit_code) << r.err;
  EXPECT_NE(std::string::npos, r.err.find("job 424242 does not exist")) << r.err;
  EXPECT_EQ(std::string::npos, r.err.find("CONTEXT")) << r.err;
  EXPECT_EQ(std::string::npos, r.err.find("PL/pgSQL")) << r.err;
}

}  // namespace
}  // namespace pgfleet::testing
