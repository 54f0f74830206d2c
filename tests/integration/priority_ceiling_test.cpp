// The priority ceiling (issue 38): a job or formation template above its
// owner's max_priority (the setting, default 50, or the owner's row of
// pgfleet.role_limits) is refused, naming the field, the value, the ceiling
// and where it came from; owners that are operators or admins are not held
// to it; replicas a scheduler inserts from a checked template are not
// checked again.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

TEST(PriorityCeiling, ASubmitterAboveTheSettingIsRefusedNamingTheRule) {
  TestDatabase db;
  Sql admin(db);
  const std::string a = db.CreateLogin("alice", {"pgfleet_submitter"});
  Sql alice(db.DsnAs(a));
  std::string err = alice.ErrorOf("select pgfleet.submit(array['true'], priority => 90)");
  EXPECT_NE(err.find("priority 90 is above 50 for role " + a + " (setting max_priority)"),
            std::string::npos)
      << err;
  err = alice.ErrorOf("insert into pgfleet.jobs (command, priority) values ('{true}', 51)");
  EXPECT_NE(err.find("priority 51 is above 50"), std::string::npos) << err;
  // Many rows: the same rule, naming the row.
  err = alice.ErrorOf(
      "insert into pgfleet.jobs (command, priority) values ('{a}', 10), ('{b}', 100)");
  EXPECT_NE(err.find("priority 100 is above 50"), std::string::npos) << err;
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.jobs"), 0);

  // At or below the ceiling; and after the operator raises the setting.
  EXPECT_EQ(
      alice.ErrorOf("insert into pgfleet.jobs (command, priority) values ('{a}', 50), ('{b}', 0)"),
      "");
  admin.Exec("insert into pgfleet.settings (name, value) values ('max_priority', '100')");
  EXPECT_EQ(alice.ErrorOf("select pgfleet.submit(array['true'], priority => 100)"), "");
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.jobs"), 3);
}

TEST(PriorityCeiling, ARolesRowOverridesTheSettingAndOperatorsAreNotHeld) {
  TestDatabase db;
  Sql admin(db);
  const std::string a = db.CreateLogin("alice", {"pgfleet_submitter"});
  const std::string b = db.CreateLogin("bob", {"pgfleet_submitter"});
  const std::string o = db.CreateLogin("oscar", {"pgfleet_operator"});
  Sql alice(db.DsnAs(a)), bob(db.DsnAs(b)), oscar(db.DsnAs(o));
  oscar.Exec(
      "insert into pgfleet.role_limits (role, name, value) values ($1, 'max_priority', '80')", a);
  EXPECT_EQ(alice.ErrorOf("select pgfleet.submit(array['true'], priority => 80)"), "");
  std::string err = alice.ErrorOf("select pgfleet.submit(array['true'], priority => 81)");
  EXPECT_NE(err.find("priority 81 is above 80 for role " + a + " (max_priority for role " + a +
                     " in pgfleet.role_limits)"),
            std::string::npos)
      << err;
  EXPECT_NE(bob.ErrorOf("select pgfleet.submit(array['true'], priority => 80)").find("above 50"),
            std::string::npos);
  // Operators and admins take any priority (the test suite runs as an admin).
  EXPECT_EQ(oscar.ErrorOf("select pgfleet.submit(array['true'], priority => 100)"), "");
  EXPECT_EQ(admin.ErrorOf("select pgfleet.submit(array['true'], priority => 100)"), "");
  // A submitter cannot raise a priority afterwards: it may not update jobs.
  long long job = alice.Num("select pgfleet.submit(array['true'], priority => 10)");
  EXPECT_NE(alice.ErrorOf("update pgfleet.jobs set priority = 100 where id = $1", job)
                .find("permission denied"),
            std::string::npos);
  EXPECT_EQ(admin.Num("select priority from pgfleet.jobs where id = $1", job), 10);
}

TEST(PriorityCeiling, AFormationTemplateIsCheckedForItsOwnerWhenWrittenAndItsReplicasInherit) {
  TestDatabase db;
  Sql admin(db);
  const std::string a = db.CreateLogin("alice", {"pgfleet_submitter"});
  std::string err = admin.ErrorOf(
      "insert into pgfleet.formations (name, kind, replicas, command, owner, priority)"
      " values ('web', 'service', 1, '{sleep,9}', $1, 90)",
      a);
  EXPECT_NE(err.find("priority 90 is above 50 for role " + a), std::string::npos) << err;
  admin.Exec(
      "insert into pgfleet.formations (name, kind, replicas, command, owner, priority)"
      " values ('web', 'service', 2, '{sleep,9}', $1, 40)",
      a);
  err = admin.ErrorOf("update pgfleet.formations set priority = 70 where name = 'web'");
  EXPECT_NE(err.find("priority 70 is above 50"), std::string::npos) << err;
  err = admin.ErrorOf("select pgfleet.update_formation('web', '{\"priority\": 99}')");
  EXPECT_NE(err.find("priority 99 is above 50"), std::string::npos) << err;
  // Within the owner's row: accepted, and replicas (a scheduler's insert) take it.
  admin.Exec("insert into pgfleet.role_limits values ($1, 'max_priority', '70')", a);
  EXPECT_EQ(admin.ErrorOf("update pgfleet.formations set priority = 70 where name = 'web'"), "");
  admin.Exec(
      "select pgfleet.create_replicas((select id from pgfleet.formations where name = 'web'), 2)");
  EXPECT_EQ(
      admin.Str("select string_agg(priority::text, ',') from pgfleet.jobs where formation = 'web'"),
      "70,70");
}

TEST(PriorityCeiling, HostileCeilingsAreRefusedNamingTheRuleAndChangeNothing) {
  TestDatabase db;
  Sql admin(db);
  const std::string a = db.CreateLogin("alice", {"pgfleet_submitter"});
  Sql alice(db.DsnAs(a));
  for (auto [sql, words] : std::vector<std::pair<std::string, std::string>>{
           {"insert into pgfleet.role_limits values ('" + a + "', 'max_priority', '49')",
            "max_priority must be between 50 and 100 (got 49)"},
           {"insert into pgfleet.role_limits values ('" + a + "', 'max_priority', '101')",
            "max_priority must be between 50 and 100 (got 101)"},
           {"insert into pgfleet.role_limits values ('" + a + "', 'max_priority', '-1')",
            "max_priority must be between 50 and 100"},
           {"insert into pgfleet.role_limits values ('" + a + "', 'max_priority', 'high')",
            "max_priority must be an integer (got \"high\")"},
           {"insert into pgfleet.role_limits values ('" + a +
                "', 'max_priority', '99999999999999999999999')",
            "max_priority must be an integer"},
           {"insert into pgfleet.role_limits values ('" + a + "', 'max_priority', '60.5')",
            "max_priority must be an integer"},
           {"insert into pgfleet.settings (name, value) values ('max_priority', '1000')",
            "max_priority must be between 50 and 100 (got 1000)"},
           {"insert into pgfleet.role_limits values ('nobody_here', 'max_priority', '60')",
            "role nobody_here does not exist"},
           {"insert into pgfleet.jobs (command, priority) values ('{true}', 101)",
            "priority must be between 0 and 100"},
           {"insert into pgfleet.jobs (command, priority) values ('{true}', -1)",
            "priority must be between 0 and 100"},
       }) {
    std::string e = admin.ErrorOf(sql);
    EXPECT_NE(e.find(words), std::string::npos) << sql << ": " << e;
  }
  EXPECT_NE(
      alice.ErrorOf("insert into pgfleet.role_limits values ('" + a + "', 'max_priority', '100')")
          .find("permission denied"),
      std::string::npos);
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.role_limits"), 0);
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.settings where name = 'max_priority'"), 0);
  EXPECT_EQ(admin.Num("select count(*) from pgfleet.jobs"), 0);
  // A template whose owner is no role (an admin may write any owner) is held
  // to the setting.
  std::string e = admin.ErrorOf(
      "insert into pgfleet.formations (name, owner, priority) values ('g', 'ghost', 70)");
  EXPECT_NE(e.find("priority 70 is above 50 for role ghost (setting max_priority)"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace pgfleet::integration
