// The whole cluster on least-privilege logins (docs/security.md): a scheduler
// login in pgfleet_scheduler, hostd logins in pgfleet_host bound to their host
// ids, submitters in pgfleet_submitter. Jobs run end to end; what a submitter
// may not do is refused by the database, and hostd refuses a privileged spec
// its dispatch does not mark privileged.

#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "core/net/http.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

class SecurityE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(db_);
    sched_ = db_.CreateLogin("sched", {"pgfleet_scheduler"});
    host_ = db_.CreateLogin("hostd", {"pgfleet_host"});
    alice_ = db_.CreateLogin("alice", {"pgfleet_submitter"});
    bob_ = db_.CreateLogin("bob", {"pgfleet_submitter"});
    carol_ = db_.CreateLogin("carol", {"pgfleet_submitter", "pgfleet_privileged"});
    // One host login may act for several host ids (here: both hosts).
    // auto_admit: its hosts get jobs once registered (HostAdmissionTest
    // covers hosts an operator admits).
    db_.Scalar("insert into pgfleet.host_logins (login, host_id, auto_admit) values ('" + host_ +
               "', 'iso', true), ('" + host_ + "', 'proc', true)");
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs();
  }
  std::string Job(const std::string& id, const std::string& column) {
    return db_.Scalar("select " + column + " from pgfleet.jobs where id = " + id);
  }
  std::string Submit(const std::string& login, std::vector<std::string> args) {
    args.insert(args.begin(), "run");
    auto r = cluster_->CliAs(db_.DsnAs(login), args);
    EXPECT_EQ(0, r.exit_code) << r.err;
    std::string id = r.out.substr(0, r.out.find_first_of(" \n"));
    return id;
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  std::string sched_, host_, alice_, bob_, carol_;
};

TEST_F(SecurityE2eTest, DaemonsOnLeastPrivilegeLoginsRunEachSubmittersJobsWhereTheyMayRun) {
  cluster_->StartScheduler("s1", {"--db", db_.DsnAs(sched_)});
  // "proc" runs the process driver (no isolation): only privileged jobs.
  cluster_->StartHost("proc", 2000, 2000, {"--db", db_.DsnAs(host_)});
  ASSERT_TRUE(cluster_->WaitHostsUp(1));

  // Alice is not privileged: no host may run her job yet, and the job says why.
  std::string a = Submit(alice_, {"--", "true"});
  ASSERT_TRUE(WaitFor([&] { return Job(a, "error").find("no host isolates jobs") == 0; }, 20s))
      << Job(a, "error");
  EXPECT_EQ("pending", Job(a, "state"));
  // Carol is: hers runs on the process host.
  std::string c = Submit(carol_, {"--", "true"});
  ASSERT_TRUE(WaitFor([&] { return Job(c, "state") == "succeeded"; }, 30s)) << Job(c, "error");
  EXPECT_EQ("proc", Job(c, "host_id"));

  // A host that isolates jobs (the sim driver stands in for containers here).
  cluster_->StartHost("iso", 2000, 2000, {"--db", db_.DsnAs(host_), "--driver", "sim"});
  ASSERT_TRUE(WaitFor([&] { return Job(a, "state") == "succeeded"; }, 30s)) << Job(a, "error");
  EXPECT_EQ("iso", Job(a, "host_id"));
  EXPECT_EQ(alice_, Job(a, "owner"));
  EXPECT_EQ("1", Job(a, "attempt"));

  // Each submitter sees only its own jobs through the CLI.
  std::string b = Submit(bob_, {"--", "true"});
  auto ps = cluster_->CliAs(db_.DsnAs(alice_), {"ps", "--all", "--json"});
  ASSERT_EQ(0, ps.exit_code) << ps.err;
  auto listed = json::parse(ps.out);
  ASSERT_TRUE(listed.is_array()) << ps.out;
  ASSERT_EQ(1u, listed.size()) << ps.out;
  EXPECT_EQ(std::stoll(a), listed[0]["id"].get<long long>()) << ps.out;
  auto cancel = cluster_->CliAs(db_.DsnAs(alice_), {"stop", b});
  EXPECT_NE(0, cancel.exit_code);
  EXPECT_NE(std::string::npos, cancel.err.find("is not yours")) << cancel.err;
  ASSERT_TRUE(WaitFor([&] { return Job(b, "state") == "succeeded"; }, 30s)) << Job(b, "error");

  // A submitter asking for root is refused at insert, naming the field; nothing is inserted.
  long long jobs = db_.Count("select count(*) from pgfleet.jobs");
  auto root = cluster_->CliAs(db_.DsnAs(alice_), {"run", "--user", "root", "--", "id"});
  EXPECT_NE(0, root.exit_code);
  EXPECT_NE(std::string::npos, root.err.find("pgfleet_privileged")) << root.err;
  EXPECT_EQ(jobs, db_.Count("select count(*) from pgfleet.jobs"));

  // Nothing ran twice, nothing drifted.
  EXPECT_EQ(0, db_.AttemptsWithRepeated("running"));
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.allocation_drift"));
}

TEST_F(SecurityE2eTest, HostdRefusesPrivilegedFeaturesTheDispatchDoesNotMarkPrivileged) {
  cluster_->StartHost("iso", 2000, 2000, {"--db", db_.DsnAs(host_), "--driver", "sim"});
  cluster_->StartHost("proc", 2000, 2000, {"--db", db_.DsnAs(host_)});
  ASSERT_TRUE(cluster_->WaitHostsUp(2));
  auto post = [&](const std::string& host, int job, const json& spec) {
    httplib::Client c(db_.Scalar("select api_url from pgfleet.hosts where id = '" + host + "'"));
    c.set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
    auto res = c.Post(
        "/v1/jobs",
        SignDispatch(db_, host,
                     json{{"jobs", {{{"job", job}, {"attempt", 1}, {"spec", spec}}}}}.dump()),
        "application/json");
    EXPECT_TRUE(res);
    if (!res) return json();
    EXPECT_EQ(200, res->status) << res->body;
    return json::parse(res->body)["results"][0];
  };
  struct Case {
    std::string host;
    json spec;
    std::string words;
  };
  int job = 800000;
  for (const Case& c : std::vector<Case>{
           {"iso",
            {{"command", {"id"}}, {"network", "none"}, {"user", "root"}},
            "runs the job as root"},
           {"iso",
            {{"command", {"id"}}, {"network", "none"}, {"user", "0:0"}},
            "runs the job as root"},
           {"iso", {{"command", {"id"}}, {"network", "host"}}, "network host"},
           {"iso", {{"command", {"id"}}}, "network host"},  // the spec's default is the host's
           {"iso", {{"command", {"id"}}, {"network", "none"}, {"rootfs", "/"}}, "is a path"},
           {"proc", {{"command", {"id"}}, {"network", "none"}}, "process driver does not isolate"},
       }) {
    json r = post(c.host, ++job, c.spec);
    EXPECT_EQ("failed", r["status"]) << c.spec.dump() << " " << r.dump();
    EXPECT_NE(std::string::npos, r["error"].get<std::string>().find(c.words))
        << c.spec.dump() << " " << r.dump();
  }
  // The same specs marked privileged start.
  json ok = post("iso", ++job, {{"command", {"id"}}, {"user", "root"}, {"privileged", true}});
  EXPECT_EQ("started", ok["status"]) << ok.dump();
  ok = post("proc", ++job, {{"command", {"true"}}, {"privileged", true}});
  EXPECT_EQ("started", ok["status"]) << ok.dump();
  // And an unprivileged, isolated spec starts on the isolating host.
  ok = post("iso", ++job, {{"command", {"id"}}, {"network", "none"}, {"rootfs", "busybox"}});
  EXPECT_EQ("started", ok["status"]) << ok.dump();
}

}  // namespace
}  // namespace pgfleet::testing
