// Formation versions and rollouts in SQL (sql/022_versions.sql): what makes
// a version and a rollout, what is refused (naming the field and rule, and
// changing nothing), who may promote and revert, and the scheduler's writes.

#include <gtest/gtest.h>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

class VersionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sql_.Exec(
        "insert into pgfleet.formations (name, kind, replicas, command) "
        "values ('web', 'service', 2, '{sleep,300}')");
  }
  std::string Versions() {
    return sql_.Str(
        "select string_agg(v.version || ':' || array_to_string(v.changed, ','), ' ' order by "
        "v.version) from pgfleet.formation_versions v join pgfleet.formations f on f.id = "
        "v.formation_id where f.name = 'web'");
  }
  std::string Rollouts() {
    return sql_.Str(
        "select coalesce(string_agg(r.from_version || '>' || r.to_version || ':' || r.state, ' ' "
        "order by r.id), '') from pgfleet.rollouts r join pgfleet.formations f on f.id = "
        "r.formation_id where f.name = 'web'");
  }
  // Everything a refused call could have changed.
  std::string Fingerprint() {
    return sql_.Str(
        "select md5(coalesce((select string_agg(f::text, '|' order by id) from pgfleet.formations "
        "f), '')"
        " || coalesce((select string_agg(v::text, '|' order by formation_id, version)"
        "               from pgfleet.formation_versions v), '')"
        " || coalesce((select string_agg(r::text, '|' order by id) from pgfleet.rollouts r), '')"
        " || coalesce((select string_agg(j::text, '|' order by id) from pgfleet.jobs j), ''))");
  }

  TestDatabase db_;
  Sql sql_{db_};
};

TEST_F(VersionsTest, ATemplateChangeMakesAVersionAndARollout) {
  EXPECT_EQ("1:", Versions());
  EXPECT_EQ("", Rollouts()) << "creating a formation rolls nothing out";
  sql_.Exec("update pgfleet.formations set replicas = 3, max_parallel = '50%' where name = 'web'");
  EXPECT_EQ("1:", Versions()) << "scale and rollout settings are no template";
  sql_.Exec("update pgfleet.formations set command = '{sleep,301}', cpu = 200 where name = 'web'");
  EXPECT_EQ("1: 2:command,cpu", Versions());
  EXPECT_EQ("1>2:running", Rollouts());
  EXPECT_EQ("2", sql_.Str("select version from pgfleet.formations where name = 'web'"));
  // Changed again mid-rollout: the newer version supersedes it.
  EXPECT_EQ(3, sql_.Num("select pgfleet.update_formation('web', '{\"env\": {\"A\": \"b\"}}')"));
  EXPECT_EQ("1>2:superseded 2>3:running", Rollouts());
  EXPECT_EQ(sql_.Str("select current_user"),
            sql_.Str("select created_by from pgfleet.formation_versions v join pgfleet.formations f"
                     " on f.id = v.formation_id where f.name = 'web' and v.version = 3"));
  // The replicas a scheduler creates are of the version in force.
  sql_.Exec("select pgfleet.create_replicas(f.id, 1) from pgfleet.formations f where name = 'web'");
  EXPECT_EQ("3", sql_.Str("select version from pgfleet.jobs where formation = 'web'"));
}

TEST_F(VersionsTest, CanariesStartTheRolloutWaitingForThem) {
  sql_.Exec("update pgfleet.formations set canary = 1 where name = 'web'");
  sql_.Exec("update pgfleet.formations set command = '{sleep,301}' where name = 'web'");
  EXPECT_EQ("1>2:canary", Rollouts());
  EXPECT_NE(std::string::npos,
            sql_.ErrorOf("select pgfleet.promote('web')")
                .find("the canaries of formation web (version 2) are not healthy yet"));
  // A scheduler saw them healthy.
  sql_.Exec(
      "select pgfleet.rollout_progress(r.id, 'waiting_promotion', 1, 1, 'x') "
      "from pgfleet.rollouts r where r.finished_at is null");
  sql_.Exec("select pgfleet.promote('web')");
  EXPECT_EQ("1>2:running", Rollouts());
  EXPECT_NE(
      std::string::npos,
      sql_.ErrorOf("select pgfleet.promote('web')").find("waits for no promotion (it is running)"));
}

TEST_F(VersionsTest, RevertSetsTheTemplateAndVersionBack) {
  sql_.Exec("update pgfleet.formations set command = '{sleep,301}' where name = 'web'");
  sql_.Exec("select pgfleet.revert('web', 1)");
  EXPECT_EQ("{sleep,300}|1",
            sql_.Str("select command::text || '|' || version from pgfleet.formations "
                     "where name = 'web'"));
  EXPECT_EQ("1:", Versions().substr(0, 2)) << "a revert makes no new version";
  EXPECT_EQ("1>2:superseded 2>1:running", Rollouts());
  EXPECT_EQ(
      "t",
      sql_.Str("select revert::text from pgfleet.rollouts order by id desc limit 1").substr(0, 1));
}

TEST_F(VersionsTest, AFailedRolloutRevertsToTheLastHealthyVersionWithAutoRevert) {
  // Version 1 was healthy; version 2's rollout fails.
  sql_.Exec("update pgfleet.formation_versions set healthy_at = now()");
  sql_.Exec(
      "update pgfleet.formations set auto_revert = true, command = '{false}' where name = 'web'");
  EXPECT_EQ("1", sql_.Str("select pgfleet.fail_rollout(id, 'no progress') from pgfleet.rollouts "
                          "where finished_at is null"));
  EXPECT_EQ("1>2:reverted 2>1:running", Rollouts());
  EXPECT_EQ("no progress; reverted to version 1",
            sql_.Str("select message from pgfleet.rollouts where state = 'reverted'"));
  EXPECT_EQ("{sleep,300}", sql_.Str("select command from pgfleet.formations where name = 'web'"));
  // Without auto_revert (or no healthy version) it just fails.
  sql_.Exec(
      "update pgfleet.formations set auto_revert = false, command = '{false}' where name = 'web'");
  EXPECT_EQ("", sql_.Str("select pgfleet.fail_rollout(id, 'no progress') from pgfleet.rollouts "
                         "where finished_at is null"));
  EXPECT_EQ("failed", sql_.Str("select state from pgfleet.rollouts order by id desc limit 1"));
  EXPECT_EQ("{false}", sql_.Str("select command from pgfleet.formations where name = 'web'"));
}

TEST_F(VersionsTest, BadSettingsAreRefusedNamingTheRuleAndChangeNothing) {
  const std::string before = Fingerprint();
  struct Case {
    std::string sql, error;
  };
  const std::vector<Case> cases = {
      {"update pgfleet.formations set max_parallel = '0'",
       "max_parallel must be a count 1-10000 or a percentage 1%-100%"},
      {"update pgfleet.formations set max_parallel = '101%'", "max_parallel must be a count"},
      {"update pgfleet.formations set max_parallel = 'ten'", "max_parallel must be a count"},
      {"update pgfleet.formations set max_parallel = '99999'", "max_parallel must be a count"},
      {"update pgfleet.formations set min_healthy_time = '-1s'",
       "min_healthy_time must be between 0 and 1 hour"},
      {"update pgfleet.formations set min_healthy_time = '2 hours'",
       "min_healthy_time must be between"},
      {"update pgfleet.formations set progress_deadline = '0'",
       "progress_deadline must be between 1 second and 1 day"},
      {"update pgfleet.formations set canary = -1", "canary must be between 0 and 1000"},
      {"update pgfleet.formations set canary = 100000", "canary must be between 0 and 1000"},
      {"update pgfleet.formations set version = 7 where name = 'web'",
       "formation web has no version 7"},
      {"update pgfleet.formations set version = 2 where name = 'web'",
       "formation web has no version 2"},
      {"select pgfleet.update_formation('web', '{\"owner\": \"mallory\"}')",
       "column owner cannot be changed by update_formation"},
      {"select pgfleet.update_formation('web', '{\"version\": 1}')",
       "column version cannot be changed"},
      {"select pgfleet.update_formation('web', '[1]')", "changes must be a non-empty object"},
      {"select pgfleet.update_formation('web', '{}')", "changes must be a non-empty object"},
      {"select pgfleet.update_formation('nope', '{\"cpu\": 5}')", "no formation named nope"},
      {"select pgfleet.update_formation('web', '{\"cpu\": -5}')", "cpu must be > 0"},
      {"select pgfleet.update_formation('web', '{\"max_parallel\": \"0%\"}')",
       "max_parallel must be a count"},
      {"select pgfleet.revert('web', 9)", "formation web has no version 9 (it has 1 to 1)"},
      {"select pgfleet.revert('web', 1)", "formation web already runs version 1"},
      {"select pgfleet.revert('nope', 1)", "no formation named nope"},
      {"select pgfleet.promote('web')", "formation web has no rollout in progress"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.sql);
    std::string err = sql_.ErrorOf(c.sql);
    EXPECT_NE(std::string::npos, err.find(c.error)) << err;
  }
  EXPECT_EQ(before, Fingerprint());
}

TEST_F(VersionsTest, OnlyOperatorsChangeVersionsAndOnlySchedulersWriteRollouts) {
  const std::string alice = db_.CreateLogin("alice", {"pgfleet_submitter"});
  const std::string olga = db_.CreateLogin("olga", {"pgfleet_operator"});
  const std::string rita = db_.CreateLogin("rita", {"pgfleet_reader"});
  Sql a(db_.DsnAs(alice)), o(db_.DsnAs(olga)), r(db_.DsnAs(rita));
  sql_.Exec("update pgfleet.formations set network = 'none' where name = 'web'");  // version 2
  sql_.Exec("update pgfleet.formations set command = '{sleep,301}' where name = 'web'");  // 3
  const std::string before = Fingerprint();
  EXPECT_NE(
      std::string::npos,
      a.ErrorOf("select pgfleet.promote('web')").find("needs membership in pgfleet_operator"));
  EXPECT_NE(std::string::npos,
            a.ErrorOf("select pgfleet.revert('web', 1)").find("permission denied"));
  EXPECT_NE(std::string::npos, a.ErrorOf("select pgfleet.update_formation('web', '{\"cpu\": 5}')")
                                   .find("permission denied"));
  EXPECT_NE(
      std::string::npos,
      a.ErrorOf(
           "insert into pgfleet.formation_versions (formation_id, version, template, created_by)"
           " select id, 9, '{}', 'x' from pgfleet.formations")
          .find("permission denied"));
  EXPECT_NE(std::string::npos,
            o.ErrorOf("update pgfleet.rollouts set state = 'succeeded'").find("permission denied"));
  EXPECT_NE(std::string::npos,
            o.ErrorOf("select pgfleet.fail_rollout(1, 'x')").find("permission denied"));
  EXPECT_NE(std::string::npos,
            o.ErrorOf("select pgfleet.finish_rollout(1, 1, 1)").find("permission denied"));
  // A submitter's job cannot claim to be a replica of a version.
  EXPECT_NE(std::string::npos,
            a.ErrorOf("insert into pgfleet.jobs (command, version) values ('{true}', 2)")
                .find("version"));
  EXPECT_NE(std::string::npos, a.ErrorOf("insert into pgfleet.jobs (command, version) select "
                                         "'{true}', 2 from generate_series(1, 3)")
                                   .find("version"));
  EXPECT_EQ(before, Fingerprint());
  // An operator may revert, but not to a version only a privileged role
  // could write (version 1 runs on the host's network).
  EXPECT_NE(std::string::npos, o.ErrorOf("select pgfleet.revert('web', 1)")
                                   .find("only members of pgfleet_privileged may ask for it"));
  EXPECT_EQ(before, Fingerprint());
  EXPECT_EQ("", o.ErrorOf("select pgfleet.revert('web', 2)"));
  // Readers and submitters see versions and rollouts.
  EXPECT_EQ("3", r.Str("select count(*) from pgfleet.rollout_status where formation = 'web'"));
  EXPECT_EQ("3", r.Str("select count(*) from pgfleet.formation_versions v join pgfleet.formations f"
                       " on f.id = v.formation_id where f.name = 'web'"));
  EXPECT_EQ("3", a.Str("select count(*) from pgfleet.rollout_status where formation = 'web'"));
}

}  // namespace
}  // namespace pgfleet::integration
