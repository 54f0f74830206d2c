// The bad-input table (docs/security.md): one test, every front door. SQL as
// a submitter (privilege escalations included), CLI flags, daemon config
// files and host API requests. Each case must be refused with a message that
// names the field or the rule, and must change nothing: the database's rows
// are fingerprinted before and after every case, and hostd must still serve.

#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/net/http.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(db_);
    cluster_->StartHost("h1", 2000, 2000);
    ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
    alice_ = db_.CreateLogin("alice", {"pgfleet_submitter"});
    bob_ = db_.CreateLogin("bob", {"pgfleet_submitter"});
    bobs_job_ = db_.Scalar("set role " + bob_ + "; select pgfleet.submit(array['true'])");
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs();
  }

  // Every row pgfleet keeps, hashed (heartbeats change by themselves: left out).
  std::string Fingerprint() {
    return db_.Scalar(
        "select md5(concat_ws('|',"
        " (select string_agg(j::text, ',' order by id) from pgfleet.jobs j),"
        " (select string_agg(e::text, ',' order by id) from pgfleet.job_events e),"
        " (select string_agg(f::text, ',' order by id) from pgfleet.formations f),"
        " (select string_agg(h.id || h.state || h.cpu_allocated || h.generation, ',') from "
        "pgfleet.hosts h),"
        " (select string_agg(s::text, ',' order by name) from pgfleet.settings s),"
        " (select string_agg(l::text, ',') from pgfleet.host_logins l)))");
  }
  std::string AsAlice(const std::string& sql) {
    try {
      pqxx::connection c(db_.DsnAs(alice_));
      pqxx::work tx(c);
      tx.exec(sql);
      tx.commit();
    } catch (const pqxx::sql_error& e) {
      return e.what();
    }
    return "";
  }
  std::string Config(const std::string& name, const std::string& text) {
    std::string path = cluster_->dir() + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  std::string alice_, bob_, bobs_job_;
};

TEST_F(BadInputTest, EveryFrontDoorRefusesBadInputNamingTheRuleAndChangesNothing) {
  int cases = 0;
  std::string before = Fingerprint();
  auto unchanged = [&](const std::string& what) {
    std::string now = Fingerprint();
    EXPECT_EQ(before, now) << what << " changed something";
    before = now;
  };

  // --- SQL as a submitter -------------------------------------------------
  struct SqlCase {
    std::string sql, words;
  };
  const std::string ins = "insert into pgfleet.jobs (command";
  for (const SqlCase& c : std::vector<SqlCase>{
           {ins + ", run_as) values ('{id}', 'root')", "only members of pgfleet_privileged"},
           {ins + ", run_as) values ('{id}', '0:0')", "runs the job as root"},
           {ins + ", network) values ('{id}', 'host')", "network host"},
           {ins + ", rootfs) values ('{id}', '/')", "rootfs / is a path"},
           {ins + ", rootfs) values ('{id}', '../../etc')", "is a path"},
           {ins + ", owner) values ('{id}', 'postgres')", "owner must be the submitting role"},
           {ins + ", privileged) values ('{id}', true)", "privileged is set by pgfleet"},
           {ins + ", state) values ('{id}', 'succeeded')", "state is set by pgfleet"},
           {ins + ", exit_code) values ('{id}', 0)", "exit_code is set by pgfleet"},
           {ins + ", attempt) values ('{id}', 5)", "attempt is set by pgfleet"},
           {ins + ", cpu) values ('{id}', 0)", "cpu must be > 0"},
           {ins + ", memory) values ('{id}', -1)", "memory must be > 0"},
           {ins + ", priority) values ('{id}', 101)", "priority must be between 0 and 100"},
           {ins + ") values ('{}')", "command must be a non-empty array"},
           {ins + ", env) values ('{id}', '{\"=x\": \"y\"}')", "env names must be non-empty"},
           {ins + ", env) values ('{id}', '[1]')", "env must be an object of strings"},
           {ins + ", max_attempts) values ('{id}', 0)", "max_attempts must be >= 1"},
           {ins + ", network) values ('{id}', 'overlay')", "network must be 'host', 'none' or 'bridge'"},
           {ins + ", ports) values ('{id}', '{\"web\": 80}')",
            "ports.web asks for host port 80: ports below 1024"},
           {ins + ", ports) values ('{id}', '{\"Web\": 0}')", "ports names must match"},
           {ins + ", ports) values ('{id}', '{\"web\": 70000}')", "from 0 to 65535"},
           {ins + ", ports) values ('{id}', '{\"a\": 21000, \"b\": 21000}')",
            "must not name one port number twice"},
           {ins + ", host_ports) values ('{id}', '{\"web\": 20000}')", "host_ports is set by pgfleet"},
           {ins + ", address) values ('{id}', '10.0.0.1')", "address is set by pgfleet"},
           {"insert into pgfleet.job_ports values ('h1', 20000, 1, 1, 'x')",
            "permission denied for table job_ports"},
           {"select pgfleet.submit(array['id'], run_as => 'root')", "pgfleet_privileged"},
           {"update pgfleet.jobs set state = 'succeeded' where id = " + bobs_job_,
            "permission denied for table jobs"},
           {"delete from pgfleet.jobs", "permission denied for table jobs"},
           {"update pgfleet.hosts set cpu_allocated = 0", "permission denied for table hosts"},
           {"insert into pgfleet.job_events (job_id, attempt, kind) values (" + bobs_job_ +
                ", 1, 'succeeded')",
            "permission denied for table job_events"},
           {"select pgfleet.cancel(" + bobs_job_ + ")", "is not yours"},
           {"select pgfleet.drain('h1')", "needs membership in pgfleet_operator"},
           {"select pgfleet.set_host_state('h1', 'offline')",
            "needs membership in pgfleet_operator"},
           {"select pgfleet.scale('default', 5)", "needs membership in pgfleet_operator"},
           {"select * from pgfleet.report_jobs('h1', 1, '[]')", "needs membership in pgfleet_host"},
           {"select pgfleet.register_host('h9', 'http://x', 1, 1, '{}', 'process', null)",
            "needs membership in pgfleet_host"},
           {"insert into pgfleet.host_logins values (current_user, 'h1')",
            "permission denied for table host_logins"},
           {"insert into pgfleet.formations (name) values ('mine')",
            "permission denied for table formations"},
           {"update pgfleet.settings set value = '1'", "permission denied for table settings"},
       }) {
    std::string err = AsAlice(c.sql);
    EXPECT_NE(std::string::npos, err.find(c.words)) << c.sql << "\n  got: " << err;
    unchanged(c.sql);
    ++cases;
  }

  // --- CLI flags ------------------------------------------------------------
  struct CliCase {
    std::vector<std::string> args;
    std::string words;
    int exit_code;
  };
  for (const CliCase& c : std::vector<CliCase>{
           {{"run", "--cpu", "0", "--", "true"}, "cpu must be > 0", 2},
           {{"run", "--memory", "-5", "--", "true"}, "memory must be > 0", 2},
           {{"run", "--priority", "200", "--", "true"}, "priority must be between 0 and 100", 2},
           {{"run", "--env", "NOEQUALS", "--", "true"}, "--env", 2},
           {{"run", "--constraint", "zone", "--", "true"}, "--constraint", 2},
           {{"run", "--network", "overlay", "--", "true"}, "network must be", 2},
           {{"run", "--port", "http", "--", "true"}, "--port must be KEY=VALUE", 2},
           {{"run", "--port", "http=x", "--", "true"}, "--port http must be a whole number", 2},
           {{"run", "--port", "http=70000", "--", "true"}, "from 0 to 65535", 2},
           {{"run", "--port", "http=-1", "--", "true"}, "--port http must be a whole number", 2},
           {{"run", "--port", "HTTP=0", "--", "true"}, "ports names must match", 2},
           {{"run", "--port", "a=0", "--port", "a=1", "--", "true"}, "--port a is given twice", 2},
           {{"run", "--port", "a=21000", "--port", "b=21000", "--", "true"},
            "must not name one port number twice", 2},
           {{"endpoints", "a", "b"}, "expected at most one FORMATION", 2},
           {{"run", "--max-attempts", "0", "--", "true"}, "max_attempts must be >= 1", 2},
           {{"run", "--cpu", "lots", "--", "true"}, "cpu", 2},
           {{"formation", "scale", "default", "3x"}, "replicas must be a whole number", 2},
           {{"run", "--preemptible", "no", "--", "true"},
            "--preemptible must be true or false (got \"no\")", 2},
           {{"formation", "create", "pz", "--preemptible", "maybe"},
            "--preemptible must be true, false or default (got \"maybe\")", 2},
           {{"formation", "update", "default", "--preemptible", "1"}, "--preemptible must be", 2},
           {{"formation", "update", "default", "--min-available=-1"},
            "--min-available must be a whole number from 0 to 100000 or none", 2},
           {{"formation", "update", "default", "--min-available", "2x"}, "--min-available must", 2},
           {{"formation", "create", "pz", "--min-available", "1000001"}, "--min-available must", 2},
           {{"formation", "update", "default", "--max-running", "0"},
            "--max-running must be a whole number from 1 to 100000 or none", 2},
           {{"logs", "abc"}, "JOB must be a positive integer", 2},
           {{"stop", "0"}, "JOB must be a positive integer", 2},
           {{"inspect", "0"}, "JOB must be a positive integer", 2},
           {{"no-such-command"}, "no-such-command", 2},
       }) {
    auto r = cluster_->Cli(c.args, 60s);
    std::string what = "pgfleet";
    for (const auto& a : c.args) what += " " + a;
    EXPECT_EQ(c.exit_code, r.exit_code) << what << "\n  " << r.err;
    EXPECT_NE(std::string::npos, r.err.find(c.words)) << what << "\n  got: " << r.err;
    unchanged(what);
    ++cases;
  }
  // As a submitter, a privileged feature is refused by the database (exit 1).
  auto root = cluster_->CliAs(db_.DsnAs(alice_), {"run", "--user", "root", "--", "id"});
  EXPECT_EQ(1, root.exit_code) << root.err;
  EXPECT_NE(std::string::npos, root.err.find("only members of pgfleet_privileged")) << root.err;
  unchanged("pgfleet run --user root (as a submitter)");
  ++cases;

  // --- Daemon config files ----------------------------------------------------
  struct ConfigCase {
    std::string binary, text, words;
  };
  const std::string common =
      "db = " + db_.dsn() + "\ntoken-file = " + cluster_->token_file() + "\n";
  for (const ConfigCase& c : std::vector<ConfigCase>{
           {"pgfleet-schedulerd", common + "no-such-option = 1\n", "no-such-option"},
           {"pgfleet-schedulerd", common + "tick = 0\n", "--tick"},
           {"pgfleet-schedulerd", common + "batch-size = -3\n", "--batch-size"},
           {"pgfleet-hostd", common + "id = hx\ncpu = -1\n", "--cpu"},
           {"pgfleet-hostd", common + "id = hx\nheartbeat-interval = 1x\n", "--heartbeat-interval"},
           {"pgfleet-hostd", common + "id = hx\ndriver = kvm\n", "--driver"},
       }) {
    std::string path = Config("case" + std::to_string(cases) + ".conf", c.text);
    auto r = testing::Run({BinaryPath(c.binary), "--config", path}, {}, 30s);
    EXPECT_EQ(2, r.exit_code) << c.binary << " " << c.text << "\n  " << r.err;
    EXPECT_NE(std::string::npos, r.err.find(c.words)) << c.text << "\n  got: " << r.err;
    unchanged(c.binary + " --config " + c.text);
    ++cases;
  }

  // --- Host API requests --------------------------------------------------------
  httplib::Client api(db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  api.set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
  struct ApiCase {
    std::string method, path, body;
    int status;
    std::string words;  // in the response body (whole, or the item's error)
  };
  int next_job = 700000;  // ids the database does not have: their refusals change no row
  // Each item with a valid dispatch ticket: what is refused is its spec.
  auto item = [this, &next_job](const json& spec) {
    return SignDispatch(
        db_, "h1", json{{"jobs", {{{"job", ++next_job}, {"attempt", 1}, {"spec", spec}}}}}.dump());
  };
  auto unsigned_item = [&next_job](const json& spec, const json& ticket) {
    json one{{"job", ++next_job}, {"attempt", 1}, {"spec", spec}};
    if (!ticket.is_null()) one["ticket"] = ticket;
    return json{{"jobs", {one}}}.dump();
  };
  for (const ApiCase& c : std::vector<ApiCase>{
           {"POST", "/v1/jobs", "{not json", 400, "body"},
           {"POST", "/v1/jobs", "{}", 400, "body must be an object with a"},
           {"POST", "/v1/jobs", R"({"jobs":[{"job":0,"attempt":1,"spec":{}}]})", 400,
            "jobs[0].job must be an integer > 0"},
           {"POST", "/v1/jobs", R"({"jobs":[{"job":5,"attempt":-1,"spec":{}}]})", 400,
            "jobs[0].attempt must be an integer > 0"},
           {"POST", "/v1/jobs", R"({"jobs":[{"job":5,"attempt":1}]})", 400, "spec is required"},
           {"POST", "/v1/jobs", item({{"command", {"true"}}, {"cpu", -1}}), 200, "cpu must be > 0"},
           {"POST", "/v1/jobs", item({{"command", {"true"}}, {"colour", "red"}}), 200,
            "unknown field colour"},
           {"POST", "/v1/jobs", item({{"command", json::array()}}), 200, "command"},
           {"POST", "/v1/jobs", item({{"command", {"true"}}, {"privileged", "yes"}}), 200,
            "privileged must be true or false"},
           {"POST", "/v1/jobs", item({{"command", {"id"}}, {"network", "none"}}), 200,
            "process driver does not isolate jobs"},
           {"GET", "/v1/jobs/abc", "", 400, "job id"},
           {"GET", "/v1/jobs/99999999999999999999", "", 400, "job id"},
           {"POST", "/v1/jobs", unsigned_item({{"command", {"true"}}}, nullptr), 400,
            "jobs[0].ticket is required"},
           {"POST", "/v1/jobs", unsigned_item({{"command", {"true"}}}, 42), 400,
            "jobs[0].ticket is required"},
           {"POST", "/v1/jobs",
            unsigned_item(
                {{"command", {"true"}}},
                "v1:dispatch:h1:1:1:1:99999999999:0123456789abcdef:" + std::string(64, '0')),
            403, "jobs[0].ticket: ticket signature does not match"},
           {"POST", "/v1/jobs/123456/stop", "", 403, "X-Pgfleet-Ticket: no ticket"},
           {"GET", "/v1/jobs/1/logs?tail=-4", "", 400, "tail"},
       }) {
    auto res = c.method == "GET" ? api.Get(c.path) : api.Post(c.path, c.body, "application/json");
    ASSERT_TRUE(res) << c.method << " " << c.path;
    EXPECT_EQ(c.status, res->status)
        << c.method << " " << c.path << " " << c.body << "\n  " << res->body;
    std::string said = res->body;
    if (c.status == 200) {  // a refused item of a batch: its own result says why
      auto results = json::parse(res->body)["results"];
      ASSERT_EQ(1u, results.size()) << res->body;
      EXPECT_EQ("failed", results[0]["status"]) << res->body;
      said = results[0]["error"].get<std::string>();
    }
    EXPECT_NE(std::string::npos, said.find(c.words)) << c.body << "\n  got: " << said;
    unchanged(c.method + " " + c.path + " " + c.body);
    ++cases;
  }
  // Without the cluster token: 401, nothing read or started.
  httplib::Client anonymous(db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  auto res = anonymous.Post("/v1/jobs", item({{"command", {"true"}}}), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(401, res->status);
  EXPECT_NE(std::string::npos, res->body.find("cluster token")) << res->body;
  unchanged("POST /v1/jobs without a token");
  ++cases;

  // hostd took all of it and still runs jobs.
  auto health = api.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(200, health->status);
  cluster_->StartScheduler("s1");
  std::string id = db_.Scalar("select pgfleet.submit(array['true'])");
  EXPECT_TRUE(WaitFor(
      [&] { return db_.Scalar("select state from pgfleet.jobs where id = " + id) == "succeeded"; },
      30s));
  EXPECT_GE(cases, 50);
  std::cout << "bad-input cases: " << cases << "\n";
}

}  // namespace
}  // namespace pgfleet::testing
