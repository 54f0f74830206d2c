// The SQL front door (docs/security.md), as real logins of each role: what
// every role may do, and that every forbidden action fails with a message
// naming the rule and changes nothing.

#include <gtest/gtest.h>

#include "core/db/migrate.h"
#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    alice_login_ = db_.CreateLogin("alice", {"pgfleet_submitter"});
    bob_login_ = db_.CreateLogin("bob", {"pgfleet_submitter"});
    root_login_ = db_.CreateLogin("carol", {"pgfleet_submitter", "pgfleet_privileged"});
    op_login_ = db_.CreateLogin("olga", {"pgfleet_operator"});
    reader_login_ = db_.CreateLogin("rita", {"pgfleet_reader"});
    host_login_ = db_.CreateLogin("host1", {"pgfleet_host"});
    owner_.Exec("insert into pgfleet.host_logins (login, host_id) values ($1, 'h1')", host_login_);
    alice_ = std::make_unique<Sql>(db_.DsnAs(alice_login_));
    bob_ = std::make_unique<Sql>(db_.DsnAs(bob_login_));
    carol_ = std::make_unique<Sql>(db_.DsnAs(root_login_));
    olga_ = std::make_unique<Sql>(db_.DsnAs(op_login_));
    rita_ = std::make_unique<Sql>(db_.DsnAs(reader_login_));
    host1_ = std::make_unique<Sql>(db_.DsnAs(host_login_));
  }

  long long Jobs() { return owner_.Num("select count(*) from pgfleet.jobs"); }
  // A fingerprint of every row pgfleet keeps, to show a refused action changed nothing.
  std::string Everything() {
    return owner_.Str(
        "select md5(coalesce((select string_agg(j::text, '|' order by id) from pgfleet.jobs j), '')"
        " || coalesce((select string_agg(e::text, '|' order by id) from pgfleet.job_events e), '')"
        " || coalesce((select string_agg(h::text, '|' order by id) from pgfleet.hosts h), '')"
        " || coalesce((select string_agg(f::text, '|' order by id) from pgfleet.formations f), '')"
        " || coalesce((select string_agg(l::text, '|') from pgfleet.host_logins l), ''))");
  }

  TestDatabase db_;
  Sql owner_{db_};
  std::string alice_login_, bob_login_, root_login_, op_login_, reader_login_, host_login_;
  std::unique_ptr<Sql> alice_, bob_, carol_, olga_, rita_, host1_;
};

TEST_F(SecurityTest, TheRolesExistAsGroupRolesWithoutLogin) {
  for (const char* role : {"pgfleet_submitter", "pgfleet_operator", "pgfleet_reader",
                           "pgfleet_scheduler", "pgfleet_host", "pgfleet_privileged"}) {
    EXPECT_EQ(
        "f",
        owner_.Str("select rolcanlogin::text from pg_roles where rolname = $1", role).substr(0, 1))
        << role;
  }
  // Migrating again (roles already there) changes nothing and fails nothing.
  auto conn = db_.Connect();
  EXPECT_NO_THROW(db::Migrate(*conn));
}

TEST_F(SecurityTest, ASubmitterSeesAndCancelsOnlyItsOwnJobs) {
  long long a = alice_->Num("select pgfleet.submit(array['true'])");
  long long b = bob_->Num("insert into pgfleet.jobs (command) values (array['true']) returning id");
  EXPECT_EQ(alice_login_, owner_.Str("select owner from pgfleet.jobs where id = $1", a));
  EXPECT_EQ(bob_login_, owner_.Str("select owner from pgfleet.jobs where id = $1", b));

  EXPECT_EQ(1, alice_->Num("select count(*) from pgfleet.jobs"));
  EXPECT_EQ(a, alice_->Num("select id from pgfleet.jobs"));
  EXPECT_EQ(1, alice_->Num("select count(*) from pgfleet.visible_jobs"));
  EXPECT_EQ(1, alice_->Num("select count(*) from pgfleet.job_events"));
  // The status views work for a submitter (they count jobs, show no env).
  EXPECT_EQ("", alice_->ErrorOf("select * from pgfleet.host_status"));
  EXPECT_EQ("", alice_->ErrorOf("select * from pgfleet.formation_status"));
  EXPECT_EQ("", alice_->ErrorOf("select * from pgfleet.cluster_summary"));
  EXPECT_EQ(0, alice_->Num("select count(*) from pgfleet.job_events where job_id = $1", b));

  std::string before = Everything();
  std::string err = alice_->ErrorOf("select pgfleet.cancel($1)", b);
  EXPECT_NE(std::string::npos, err.find("is not yours")) << err;
  EXPECT_EQ(before, Everything());
  EXPECT_EQ("cancelled", alice_->Str("select pgfleet.cancel($1)", a));
  // An operator cancels anyone's.
  EXPECT_EQ("cancelled", olga_->Str("select pgfleet.cancel($1)", b));
}

TEST_F(SecurityTest, ASubmitterCannotWriteAnyTableDirectly) {
  long long a = alice_->Num("select pgfleet.submit(array['true'])");
  owner_.RegisterHost("h1", 1000, 1000);
  std::string before = Everything();
  for (const char* sql : {
           "update pgfleet.jobs set state = 'succeeded' where id = $1",
           "update pgfleet.jobs set exit_code = 0 where id = $1",
           "delete from pgfleet.jobs where id = $1",
           "delete from pgfleet.job_events where job_id = $1",
           "insert into pgfleet.job_events (job_id, attempt, kind) values ($1, 1, 'succeeded')",
       }) {
    std::string err = alice_->ErrorOf(sql, a);
    EXPECT_NE(std::string::npos, err.find("permission denied")) << sql << ": " << err;
  }
  for (const char* sql : {
           "update pgfleet.hosts set cpu_allocated = 0",
           "update pgfleet.formations set replicas = 5",
           "insert into pgfleet.host_logins (login, host_id) values (current_user, 'h1')",
           "update pgfleet.settings set value = '1'",
           "select env from pgfleet.formations",
       }) {
    std::string err = alice_->ErrorOf(sql);
    EXPECT_NE(std::string::npos, err.find("permission denied")) << sql << ": " << err;
  }
  EXPECT_EQ(before, Everything());
}

TEST_F(SecurityTest, SubmitterInsertsAreCheckedNamingTheColumn) {
  owner_.Num("select pgfleet.submit(array['true'])");
  long long jobs = Jobs();
  std::string before = Everything();
  struct Case {
    std::string sql, column, words;
  };
  for (const Case& c : std::vector<Case>{
           {"insert into pgfleet.jobs (command, run_as) values (array['id'], 'root')", "run_as",
            "pgfleet_privileged"},
           {"insert into pgfleet.jobs (command, run_as) values (array['id'], '0:0')", "run_as",
            "runs the job as root"},
           {"insert into pgfleet.jobs (command, run_as) values (array['id'], '0000')", "run_as",
            "runs the job as root"},
           {"insert into pgfleet.jobs (command, run_as) values (array['id'], '1000:0')", "run_as",
            "runs the job in the root group"},
           {"insert into pgfleet.jobs (command, run_as) values (array['id'], '1000:00')", "run_as",
            "runs the job in the root group"},
           {"insert into pgfleet.jobs (command, run_as) values (array['id'], '4294967296')",
            "run_as", "must be below 65536"},
           {"insert into pgfleet.jobs (command, run_as) values (array['id'], '65536')", "run_as",
            "must be below 65536"},
           {"insert into pgfleet.jobs (command, run_as) values (array['id'], '1000:70000')",
            "run_as", "must be below 65536"},
           {"insert into pgfleet.jobs (command, run_as) values (array['a'], '1000'), "
            "(array['b'], '99999')",
            "run_as", "must be below 65536"},
           {"select pgfleet.submit(array['id'], run_as => 'root')", "run_as", "root"},
           {"insert into pgfleet.jobs (command, network) values (array['id'], 'host')", "network",
            "network host"},
           {"insert into pgfleet.jobs (command, seccomp) values (array['id'], 'unconfined')",
            "seccomp", "seccomp unconfined"},
           {"select pgfleet.submit(array['id'], seccomp => 'unconfined')", "seccomp",
            "pgfleet_privileged"},
           {"insert into pgfleet.jobs (command, seccomp) values (array['id'], 'off')", "seccomp",
            "seccomp must be 'default' or 'unconfined'"},
           {"insert into pgfleet.jobs (command, rootfs) values (array['id'], '/')", "rootfs",
            "is a path"},
           {"insert into pgfleet.jobs (command, rootfs) values (array['id'], '../x')", "rootfs",
            "is a path"},
           {"insert into pgfleet.jobs (command, owner) values (array['id'], 'postgres')", "owner",
            "owner must be the submitting role"},
           {"insert into pgfleet.jobs (command, privileged) values (array['id'], true)",
            "privileged", "privileged is set by pgfleet"},
           {"insert into pgfleet.jobs (command, state) values (array['id'], 'succeeded')", "state",
            "set by pgfleet"},
           {"insert into pgfleet.jobs (command, host_id) values (array['id'], 'h1')", "host_id",
            "set by pgfleet"},
           // One bad row refuses the whole statement (many rows are checked
           // a rule at a time, one row in PL/pgSQL: the same rules).
           {"insert into pgfleet.jobs (command, run_as) values (array['a'], null), (array['b'], "
            "'root')",
            "run_as", "root"},
           {"insert into pgfleet.jobs (command, owner) values (array['a'], current_user), "
            "(array['b'], 'postgres')",
            "owner", "owner must be the submitting role"},
           {"insert into pgfleet.jobs (command, privileged) values (array['a'], false), "
            "(array['b'], true)",
            "privileged", "privileged is set by pgfleet"},
           {"insert into pgfleet.jobs (command, network) values (array['a'], 'none'), "
            "(array['b'], 'host')",
            "network", "network host"},
       }) {
    std::string err = alice_->ErrorOf(c.sql);
    EXPECT_NE(std::string::npos, err.find(c.words)) << c.sql << ": " << err;
    // The column is named in the message or its COLUMN field.
    EXPECT_NE(std::string::npos, err.find(c.column == "run_as" ? "user" : c.column))
        << c.sql << ": " << err;
  }
  EXPECT_EQ(jobs, Jobs());
  EXPECT_EQ(before, Everything());

  // What a submitter gets by default: its own network, not the host's.
  long long id = alice_->Num("select pgfleet.submit(array['true'], rootfs => 'busybox')");
  EXPECT_EQ("none", owner_.Str("select network from pgfleet.jobs where id = $1", id));
  EXPECT_EQ("false", owner_.Str("select privileged::text from pgfleet.jobs where id = $1", id));
}

TEST_F(SecurityTest, APrivilegedSubmitterMayAskForRootHostNetworkAndARootfsPath) {
  long long id = carol_->Num(
      "insert into pgfleet.jobs (command, run_as, network, rootfs) values (array['id'], 'root', "
      "'host', '/srv/images/x') returning id");
  EXPECT_EQ("true", owner_.Str("select privileged::text from pgfleet.jobs where id = $1", id));
  EXPECT_EQ("host", owner_.Str("select network from pgfleet.jobs where id = $1", id));
  EXPECT_EQ("true", owner_.Str("select pgfleet.job_spec(j)->>'privileged' from pgfleet.jobs j "
                               "where id = $1",
                               id));
  // The schema's owner is privileged too; its default network is the host's.
  long long mine = owner_.Num("select pgfleet.submit(array['true'])");
  EXPECT_EQ("host", owner_.Str("select network from pgfleet.jobs where id = $1", mine));
}

// Keys are per owner (issue 34): another owner's key neither blocks nor
// reveals anything (it used to answer "already used by another owner's job").
TEST_F(SecurityTest, AnIdempotencyKeyOfAnotherOwnersJobIsNoneOfTheCallersBusiness) {
  long long bobs = bob_->Num("select pgfleet.submit(array['true'], idempotency_key => 'k1')");
  long long jobs = Jobs();
  long long alices = alice_->Num("select pgfleet.submit(array['true'], idempotency_key => 'k1')");
  EXPECT_NE(bobs, alices);
  EXPECT_EQ(jobs + 1, Jobs());
}

TEST_F(SecurityTest, OnlyOperatorsDrainScaleAndManageFormations) {
  owner_.RegisterHost("h1", 1000, 1000);
  std::string before = Everything();
  for (const char* sql :
       {"select pgfleet.drain('h1')", "select pgfleet.set_host_state('h1', 'offline')",
        "select pgfleet.scale('default', 3)"}) {
    std::string err = alice_->ErrorOf(sql);
    EXPECT_NE(std::string::npos, err.find("needs membership in pgfleet_operator")) << sql << err;
  }
  std::string err = alice_->ErrorOf(
      "insert into pgfleet.formations (name, kind, replicas, command) values ('web', 'service', 1, "
      "array['sleep', '1'])");
  EXPECT_NE(std::string::npos, err.find("permission denied")) << err;
  EXPECT_EQ(before, Everything());

  EXPECT_EQ("", olga_->ErrorOf("select pgfleet.drain('h1')"));
  EXPECT_EQ("draining", owner_.Str("select state from pgfleet.hosts where id = 'h1'"));
  EXPECT_EQ("", olga_->ErrorOf("insert into pgfleet.formations (name, kind, replicas, command) "
                               "values ('web', 'service', 1, array['sleep', '1'])"));
  EXPECT_EQ("", olga_->ErrorOf("select pgfleet.scale('web', 2)"));
  EXPECT_EQ(op_login_, owner_.Str("select owner from pgfleet.formations where name = 'web'"));
  // An operator who is not privileged cannot template a root replica.
  before = Everything();
  err = olga_->ErrorOf("update pgfleet.formations set run_as = 'root' where name = 'web'");
  EXPECT_NE(std::string::npos, err.find("pgfleet_privileged")) << err;
  err = olga_->ErrorOf("update pgfleet.formations set privileged = true where name = 'web'");
  EXPECT_EQ("false",
            owner_.Str("select privileged::text from pgfleet.formations where name = 'web'"))
      << err;
  EXPECT_EQ(before, Everything());
  // Replicas belong to the formation's owner, with its privilege.
  owner_.Num(
      "select pgfleet.create_replicas((select id from pgfleet.formations where name = 'web'), 1)");
  EXPECT_EQ(
      op_login_ + " false",
      owner_.Str("select owner || ' ' || privileged from pgfleet.jobs where formation = 'web'"));
}

TEST_F(SecurityTest, AReaderSeesEveryJobWithEnvMaskedAndWritesNothing) {
  long long a =
      alice_->Num("select pgfleet.submit(array['true'], env => '{\"TOKEN\": \"s3cret\"}')");
  std::string err = rita_->ErrorOf("select env from pgfleet.jobs");
  EXPECT_NE(std::string::npos, err.find("permission denied")) << err;
  EXPECT_EQ(1, rita_->Num("select count(*) from pgfleet.jobs"));  // columns other than env
  EXPECT_EQ(R"({"TOKEN": "********"})",
            rita_->Str("select env::text from pgfleet.visible_jobs where id = $1", a));
  EXPECT_EQ(std::string::npos,
            rita_->Str("select to_jsonb(j)::text from pgfleet.visible_jobs j").find("s3cret"));
  EXPECT_EQ(R"({"TOKEN": "s3cret"})",
            alice_->Str("select env::text from pgfleet.visible_jobs where id = $1", a));
  // Bob sees nothing of Alice's job; an operator sees its env.
  EXPECT_EQ(0, bob_->Num("select count(*) from pgfleet.visible_jobs"));
  EXPECT_EQ(R"({"TOKEN": "s3cret"})",
            olga_->Str("select env::text from pgfleet.visible_jobs where id = $1", a));
  std::string before = Everything();
  for (const char* sql : {"select pgfleet.submit(array['true'])", "select pgfleet.cancel(1)",
                          "update pgfleet.jobs set priority = 1"}) {
    err = rita_->ErrorOf(sql);
    EXPECT_FALSE(err.empty()) << sql;
  }
  EXPECT_EQ(before, Everything());
  EXPECT_EQ("", rita_->ErrorOf("select * from pgfleet.host_status"));
  EXPECT_EQ("", rita_->ErrorOf("select * from pgfleet.job_events"));
}

TEST_F(SecurityTest, AHostActsOnlyForTheHostItsLoginIsBoundTo) {
  long long gen = host1_->Num(
      "select pgfleet.register_host('h1', 'http://127.0.0.1:1', 1000, 1000, '{}', 'container', "
      "null)");
  EXPECT_EQ(1, gen);
  owner_.RegisterHost("h2", 1000, 1000);
  long long j = owner_.Submit(100);
  owner_.Assign({j}, "h2");
  std::string before = Everything();
  for (const char* sql : {
           "select pgfleet.register_host('h2', 'http://127.0.0.1:2', 1, 1, '{}', 'process', null)",
           "select * from pgfleet.heartbeat('h2', 1, 0)",
           "select * from pgfleet.host_jobs('h2')",
       }) {
    std::string err = host1_->ErrorOf(sql);
    EXPECT_NE(std::string::npos, err.find("may not act for host h2")) << sql << ": " << err;
  }
  std::string err = host1_->ErrorOf(
      "select * from pgfleet.report_jobs('h2', 1, $1::jsonb)",
      json::array({{{"job", j}, {"attempt", 1}, {"kind", "exited"}, {"exit_code", 0}}}).dump());
  EXPECT_NE(std::string::npos, err.find("may not act for host h2")) << err;
  // Nor read jobs or their env, nor write tables.
  for (const char* sql :
       {"select count(*) from pgfleet.jobs", "select count(*) from pgfleet.visible_jobs",
        "update pgfleet.hosts set cpu = 1"}) {
    err = host1_->ErrorOf(sql);
    EXPECT_NE(std::string::npos, err.find("permission denied")) << sql << ": " << err;
  }
  // A submitter cannot act for any host.
  err = alice_->ErrorOf("select * from pgfleet.heartbeat('h1', 1, 0)");
  EXPECT_NE(std::string::npos, err.find("needs membership in pgfleet_host")) << err;
  EXPECT_EQ(before, Everything());
  // For its own host it heartbeats and reads its jobs.
  EXPECT_EQ("up", host1_->Str("select state from pgfleet.heartbeat('h1', 1, 0)"));
  EXPECT_EQ(0, host1_->Num("select count(*) from pgfleet.host_jobs('h1')"));
}

// The steps report_jobs and the insert trigger run in (as the schema's owner,
// having checked the caller) are no front door: no role may call one itself.
TEST_F(SecurityTest, TheStepsOfReportsAndInsertsAreNotCallableByAnyRole) {
  std::string before = Everything();
  for (const std::string sql : {
           "select pgfleet.apply_reports('h1', '[]')",
           "select pgfleet.apply_running_reports('h1', '[]')",
           "select * from pgfleet.read_reports('h1', '[]')",
           "select pgfleet.job_insert_refusal(null::pgfleet.jobs, 'x')",
       }) {
    for (Sql* role : {host1_.get(), alice_.get(), olga_.get(), rita_.get()}) {
      std::string err = role->ErrorOf(sql);
      EXPECT_NE(std::string::npos, err.find("permission denied for function"))
          << sql << ": " << err;
    }
  }
  EXPECT_EQ(before, Everything());
}

TEST_F(SecurityTest, SetRoleIsCheckedLikeALogin) {
  // Inside one session of the schema's owner, SET ROLE makes the caller the role set.
  auto conn = db_.Connect();
  pqxx::work tx(*conn);
  tx.exec0("set role " + conn->quote_name(alice_login_));
  EXPECT_EQ(alice_login_, tx.exec1("select pgfleet.caller()")[0].as<std::string>());
  try {
    tx.exec0("insert into pgfleet.jobs (command, run_as) values (array['id'], 'root')");
    ADD_FAILURE() << "a root job was accepted from a submitter";
  } catch (const pqxx::sql_error& e) {
    EXPECT_NE(std::string::npos, std::string(e.what()).find("pgfleet_privileged")) << e.what();
  }
}

}  // namespace
}  // namespace pgfleet::integration
