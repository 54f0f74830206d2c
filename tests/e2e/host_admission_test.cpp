// Host admission (issue 34, item 6), from the attack: a host login registers
// a host with capacity and labels sized to attract jobs (and their specs,
// env secrets included). It gets none until an operator admits it, and then
// only the capacity and labels admitted, whatever it declares later; other
// tenants' jobs run meanwhile on an admitted host. Real daemons (process
// driver: the jobs are an admin's, so privileged).

#include <gtest/gtest.h>

#include <memory>
#include <pqxx/pqxx>
#include <utility>
#include <vector>
#include <string>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

// The error of sql run as the login of dsn; "" when it succeeded.
std::string ErrorAs(const std::string& dsn, const std::string& sql) {
  try {
    pqxx::connection c(dsn);
    pqxx::nontransaction tx(c);
    tx.exec(sql);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

class HostAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(db_);
    cluster_->StartScheduler("s1");
    // An admin's hostd (as every test's): admitted when it registers.
    cluster_->StartHost("good", 1000, 1024, {"--driver", "process"});
    login_ = db_.CreateLogin("evil", {"pgfleet_host"});
    db_.Scalar("insert into pgfleet.host_logins (login, host_id) values ('" + login_ + "', 'evil')");
    StartEvil();
    ASSERT_TRUE(cluster_->WaitHostsUp(2)) << cluster_->Logs();
  }
  void TearDown() override {
    if (HasFailure()) std::cout << cluster_->Logs();
  }
  void StartEvil() {
    evil_ = &cluster_->StartHost("evil", 64000, 262144,
                                 {"--driver", "process", "--db", db_.DsnAs(login_), "--label",
                                  "gpu=a100", "--label", "zone=x"});
  }
  std::string Host(const std::string& column) {
    return db_.Scalar("select " + column + " from pgfleet.host_status where id = 'evil'");
  }
  std::string Job(const std::string& id, const std::string& column) {
    return db_.Scalar("select " + column + " from pgfleet.jobs where id = " + id);
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  std::string login_;
  Process* evil_ = nullptr;
};

TEST_F(HostAdmissionTest, AHostLoginsHostGetsNoJobUntilAdmittedAndThenOnlyWhatWasAdmitted) {
  EXPECT_EQ(Host("admitted::text"), "false");
  EXPECT_EQ(db_.Scalar("select admitted::text from pgfleet.host_status where id = 'good'"), "true");
  // Jobs for everyone: all run, none on the host not admitted (64 cores
  // against good's one would draw them all).
  db_.Scalar("insert into pgfleet.jobs (command, cpu) select array['true'], 100"
             " from generate_series(1, 20)");
  // One only the new host's labels match: it waits.
  std::string gpu = db_.Scalar(
      "insert into pgfleet.jobs (command, constraints) values ('{true}', '{\"gpu\": \"a100\"}')"
      " returning id");
  ASSERT_TRUE(WaitFor(
      [&] { return db_.Count("select count(*) from pgfleet.jobs where state = 'succeeded'") == 20; },
      60s));
  EXPECT_EQ(db_.Count("select count(*) from pgfleet.jobs where host_id = 'evil'"), 0);
  EXPECT_EQ(Job(gpu, "state"), "pending");
  auto hosts = cluster_->Cli({"hosts"});
  EXPECT_NE(hosts.out.find("(not admitted)"), std::string::npos) << hosts.out;

  // Neither a host login nor a submitter may admit it.
  std::string err = ErrorAs(db_.DsnAs(login_), "select pgfleet.admit_host('evil')");
  EXPECT_NE(err.find("admitting a host needs membership in pgfleet_operator"), std::string::npos)
      << err;
  std::string alice = db_.CreateLogin("alice", {"pgfleet_submitter"});
  err = ErrorAs(db_.DsnAs(alice), "select pgfleet.admit_host('evil')");
  EXPECT_NE(err.find("needs membership in pgfleet_operator"), std::string::npos) << err;
  // Bad admissions name the rule and change nothing.
  for (auto [args, words] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"host", "admit", "nope"}, "host nope does not exist"},
           {{"host", "admit", "evil", "--cpu", "-5"}, "--cpu must be > 0"},
           {{"host", "admit", "evil", "--label", "gpu"}, "--label must be KEY=VALUE"},
           {{"host", "offline", "evil", "--cpu", "5"}, "belong to: host admit HOST"},
       }) {
    auto r = cluster_->Cli(args);
    EXPECT_NE(r.exit_code, 0) << args.back();
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  }
  for (const char* labels : {"'{\"gpu\": 1}'", "'[]'", "'\"gpu\"'"}) {
    err = ErrorAs(db_.dsn(), std::string("select pgfleet.admit_host('evil', null, null, ") +
                                 labels + ")");
    EXPECT_NE(err.find("labels must be an object of strings"), std::string::npos) << err;
  }
  err = ErrorAs(db_.dsn(), "select pgfleet.admit_host('evil', 0)");
  EXPECT_NE(err.find("cpu must be > 0 (got 0)"), std::string::npos) << err;
  EXPECT_EQ(Host("admitted::text"), "false");

  // Admitted with less than it declares: 2 cores, 2 GiB, zone=x only.
  auto admit = cluster_->Cli({"host", "admit", "evil", "--cpu", "2000", "--memory", "2048",
                              "--label", "zone=x"});
  ASSERT_EQ(admit.exit_code, 0) << admit.err;
  EXPECT_EQ(Host("cpu || '/' || memory || ' ' || labels::text"), "2000/2048 {\"zone\": \"x\"}");
  EXPECT_EQ(Host("beyond_allowance"), "cpu, memory, labels");
  // Re-registering (a restart) declaring as much again changes nothing.
  evil_->Stop();
  StartEvil();
  ASSERT_TRUE(WaitFor([&] { return Host("generation") != "1"; }, 20s)) << cluster_->Logs();
  ASSERT_TRUE(cluster_->WaitHostsUp(2));
  EXPECT_EQ(Host("cpu || '/' || memory || ' ' || labels::text"), "2000/2048 {\"zone\": \"x\"}");
  EXPECT_EQ(Host("admitted::text"), "true");
  // The gpu job still waits (the label was not admitted); a job for zone x runs there.
  std::string zone = db_.Scalar(
      "insert into pgfleet.jobs (command, constraints) values ('{true}', '{\"zone\": \"x\"}')"
      " returning id");
  ASSERT_TRUE(WaitFor([&] { return Job(zone, "state") == "succeeded"; }, 30s));
  EXPECT_EQ(Job(zone, "host_id"), "evil");
  EXPECT_EQ(Job(gpu, "state"), "pending");

  // Admitted with the label: the job runs there.
  ASSERT_EQ(0, cluster_->Cli({"host", "admit", "evil", "--cpu", "2000", "--memory", "2048",
                              "--label", "zone=x", "--label", "gpu=a100"})
                   .exit_code);
  ASSERT_TRUE(WaitFor([&] { return Job(gpu, "state") == "succeeded"; }, 30s))
      << Job(gpu, "state") << " " << Job(gpu, "error");
  EXPECT_EQ(Job(gpu, "host_id"), "evil");
}

// A login an operator marks auto_admit: its hosts are admitted when they
// register, with what they declare (trusting that machine).
TEST_F(HostAdmissionTest, AnAutoAdmitLoginsHostIsAdmittedAtOnce) {
  std::string trusted = db_.CreateLogin("trusted", {"pgfleet_host"});
  db_.Scalar("insert into pgfleet.host_logins (login, host_id, auto_admit) values ('" + trusted +
             "', 'trusted1', true)");
  cluster_->StartHost("trusted1", 500, 512,
                      {"--driver", "process", "--db", db_.DsnAs(trusted)});
  ASSERT_TRUE(cluster_->WaitHostsUp(3)) << cluster_->Logs();
  EXPECT_EQ(db_.Scalar("select admitted::text || ' ' || admitted_by from pgfleet.host_status"
                       " where id = 'trusted1'"),
            "true login " + trusted + " (auto_admit)");
  EXPECT_EQ(Host("admitted::text"), "false");
}

}  // namespace
}  // namespace pgfleet::testing
