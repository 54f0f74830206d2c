// The operator's ceilings on what one job may take of its host (issue 33):
// pids_max and stop_grace_seconds above the settings max_pids and
// max_stop_grace_seconds are refused at insert, naming the field and the
// rule, for jobs and formation templates alike; replicas a scheduler inserts
// from a template checked before are not refused again.

#include <gtest/gtest.h>

#include <string>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

TEST(Limits, ASubmitterCannotAskForMoreProcessesOrALongerGraceThanTheOperatorAllows) {
  TestDatabase db;
  Sql admin(db);
  Sql alice(db.DsnAs(db.CreateLogin("alice", {"pgfleet_submitter"})));
  std::string err = alice.ErrorOf("insert into pgfleet.jobs (command, pids_max) values ('{true}', 100000)");
  EXPECT_NE(err.find("pids_max must be <= 4096 (setting max_pids; got 100000)"), std::string::npos)
      << err;
  err = alice.ErrorOf("select pgfleet.submit(array['true'], stop_grace_seconds => 86400)");
  EXPECT_NE(err.find("stop_grace_seconds must be <= 300 (setting max_stop_grace_seconds; got 86400)"),
            std::string::npos)
      << err;
  // Many rows: the same rule, naming the row.
  err = alice.ErrorOf(
      "insert into pgfleet.jobs (command, pids_max) values ('{a}', 64), ('{b}', 2147483647)");
  EXPECT_NE(err.find("pids_max must be <= 4096"), std::string::npos) << err;
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.jobs"), 0);

  // Within the ceilings, and after the operator raises one.
  EXPECT_EQ(alice.ErrorOf("insert into pgfleet.jobs (command, pids_max, stop_grace_seconds)"
                          " values ('{true}', 4096, 300)"),
            "");
  admin.Exec("insert into pgfleet.settings (name, value) values ('max_pids', '100000')");
  EXPECT_EQ(alice.ErrorOf("insert into pgfleet.jobs (command, pids_max) values ('{true}', 100000)"),
            "");
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.jobs"), 2);
}

TEST(Limits, AFormationTemplateOverACeilingIsRefusedWhenWritten) {
  TestDatabase db;
  Sql admin(db);
  std::string err = admin.ErrorOf(
      "insert into pgfleet.formations (name, kind, replicas, command, stop_grace_seconds)"
      " values ('web', 'service', 1, '{sleep,9}', 1000)");
  EXPECT_NE(err.find("stop_grace_seconds must be <= 300"), std::string::npos) << err;
  admin.Exec(
      "insert into pgfleet.formations (name, kind, replicas, command) values ('web', 'service', 0, "
      "'{sleep,9}')");
  err = admin.ErrorOf("update pgfleet.formations set pids_max = 5000 where name = 'web'");
  EXPECT_NE(err.find("pids_max must be <= 4096"), std::string::npos) << err;
}

}  // namespace
}  // namespace pgfleet::integration
