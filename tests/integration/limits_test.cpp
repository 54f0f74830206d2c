// The operator's ceilings on what one job may take of its host (issue 33):
// pids_max and stop_grace_seconds above the settings max_pids and
// max_stop_grace_seconds are refused at insert, naming the field and the
// rule, for jobs and formation templates alike; replicas a scheduler inserts
// from a template checked before are not refused again.

#include <gtest/gtest.h>

#include <string>
#include <vector>

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

// A job's disk (MiB of its own filesystem) and the output it keeps on its
// host (log_max_files x log_max_file_mb) have ceilings too.
TEST(Limits, DiskAndKeptOutputAreWithinTheOperatorsCeilings) {
  TestDatabase db;
  Sql admin(db);
  Sql alice(db.DsnAs(db.CreateLogin("alice", {"pgfleet_submitter"})));
  struct Case {
    std::string sql, words;
  };
  for (const Case& c : std::vector<Case>{
           {"insert into pgfleet.jobs (command, disk) values ('{true}', 20000)",
            "disk must be <= 10240 MiB (setting max_disk_mib; got 20000)"},
           {"select pgfleet.submit(array['true'], disk => 10241)", "disk must be <= 10240 MiB"},
           {"insert into pgfleet.jobs (command, disk) values ('{a}', 1), ('{b}', 99999)",
            "disk must be <= 10240 MiB"},
           {"insert into pgfleet.jobs (command, disk) values ('{true}', -1)",
            "disk must be between 0 and 16777216"},
           {"insert into pgfleet.jobs (command, disk) values ('{true}', 16777217)",
            "disk must be between 0 and 16777216"},
           {"insert into pgfleet.jobs (command, log_max_files, log_max_file_mb)"
            " values ('{true}', 100, 1024)",
            "log_max_files x log_max_file_mb must be <= 2048 MiB (setting max_log_mib; got 100 x "
            "1024)"},
           {"insert into pgfleet.jobs (command, log_max_file_mb) values ('{true}', 1000)",
            "got 5 (the host's default) x 1000"},
       }) {
    std::string err = alice.ErrorOf(c.sql);
    EXPECT_NE(err.find(c.words), std::string::npos) << c.sql << ": " << err;
  }
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.jobs"), 0);
  // Within, and after the operator raises one; a bad setting changes nothing.
  EXPECT_EQ(alice.ErrorOf("select pgfleet.submit(array['true'], disk => 10240)"), "");
  EXPECT_NE(admin.ErrorOf("insert into pgfleet.settings (name, value) values ('max_disk_mib', '0')")
                .find("max_disk_mib must be between 1 and 16777216"),
            std::string::npos);
  admin.Exec("insert into pgfleet.settings (name, value) values ('max_disk_mib', '20000')");
  EXPECT_EQ(alice.ErrorOf("insert into pgfleet.jobs (command, disk) values ('{true}', 20000)"), "");
  EXPECT_EQ(alice.ErrorOf("insert into pgfleet.jobs (command, log_max_files, log_max_file_mb)"
                          " values ('{true}', 100, 20)"),
            "");
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.jobs"), 3);
  EXPECT_EQ(admin.Num("select disk from pgfleet.visible_jobs order by id limit 1"), 10240);
  // The disk goes to the host in the job's spec.
  EXPECT_EQ(admin.Num("select (pgfleet.job_spec(j) ->> 'disk')::int from pgfleet.jobs j"
                      " order by id limit 1"),
            10240);
  // Templates too.
  std::string err = admin.ErrorOf(
      "insert into pgfleet.formations (name, kind, replicas, command, disk)"
      " values ('web', 'service', 1, '{sleep,9}', 30000)");
  EXPECT_NE(err.find("disk must be <= 20000 MiB"), std::string::npos) << err;
}

// An operator's ceilings per role (pgfleet.role_limits) stand in for the
// cluster's for that role's jobs, lower or higher; only operators write
// them, and a row is checked like the setting it stands for.
TEST(Limits, ARolesOwnCeilingsStandInForTheClustersForItsJobs) {
  TestDatabase db;
  Sql admin(db);
  Sql oscar(db.DsnAs(db.CreateLogin("oscar", {"pgfleet_operator"})));
  const std::string a = db.CreateLogin("alice", {"pgfleet_submitter"});
  const std::string b = db.CreateLogin("bob", {"pgfleet_submitter"});
  Sql alice(db.DsnAs(a));
  Sql bob(db.DsnAs(b));
  oscar.Exec("insert into pgfleet.role_limits (role, name, value) values"
             " ($1, 'max_pids', '2048'), ($2, 'max_disk_mib', '20000')",
             a, b);
  std::string err =
      alice.ErrorOf("insert into pgfleet.jobs (command, pids_max) values ('{true}', 3000)");
  EXPECT_NE(err.find("pids_max must be <= 2048 (max_pids for role " + a +
                     " in pgfleet.role_limits; got 3000)"),
            std::string::npos)
      << err;
  EXPECT_EQ(bob.ErrorOf("insert into pgfleet.jobs (command, pids_max) values ('{true}', 3000)"),
            "");
  EXPECT_EQ(bob.ErrorOf("insert into pgfleet.jobs (command, disk) values ('{true}', 15000)"), "");
  err = alice.ErrorOf("insert into pgfleet.jobs (command, disk) values ('{true}', 15000)");
  EXPECT_NE(err.find("disk must be <= 10240 MiB (setting max_disk_mib; got 15000)"),
            std::string::npos)
      << err;
  // Templates are checked against their owner's.
  err = admin.ErrorOf(
      "insert into pgfleet.formations (name, kind, replicas, command, owner, pids_max)"
      " values ('a', 'service', 0, '{sleep,9}', $1, 3000)",
      a);
  EXPECT_NE(err.find("max_pids for role " + a), std::string::npos) << err;

  // Hostile rows change nothing and name the rule; submitters may not write them.
  for (auto [sql, words] : std::vector<std::pair<std::string, std::string>>{
           {"insert into pgfleet.role_limits values ('nobody_here', 'max_pids', '2048')",
            "role nobody_here does not exist"},
           {"insert into pgfleet.role_limits values ('" + a + "', 'host_ttl_seconds', '5')",
            "name must be one of max_disk_mib, max_log_mib, max_pids, max_priority, max_stop_grace_seconds"},
           {"insert into pgfleet.role_limits values ('" + b + "', 'max_pids', '10')",
            "max_pids must be between 1024 and 4194304 (got 10)"},
           {"insert into pgfleet.role_limits values ('" + b + "', 'max_pids', 'lots')",
            "max_pids must be an integer"},
           {"update pgfleet.role_limits set value = '-1' where role = '" + a + "'",
            "max_pids must be between 1024"},
       }) {
    std::string e = oscar.ErrorOf(sql);
    EXPECT_NE(e.find(words), std::string::npos) << sql << ": " << e;
  }
  EXPECT_NE(alice.ErrorOf("insert into pgfleet.role_limits values ('" + a + "', 'max_pids', '9999')")
                .find("permission denied"),
            std::string::npos);
  EXPECT_EQ(admin.Str("select string_agg(role || ':' || name || '=' || value, ' ' order by role)"
                      " from pgfleet.role_limits"),
            a + ":max_pids=2048 " + b + ":max_disk_mib=20000");
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
