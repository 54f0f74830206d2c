// Job files with real daemons (docs/files.md): `pgfleet run --file` reads a
// local file into the job, hostd writes it into the job's work dir before it
// starts, and the job runs it; a formation's template files reach its
// replicas; bad --file words are refused naming the flag and the rule, and
// submit nothing; a job whose files the host refuses fails with the reason.

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/net/http.h"
#include "core/util/text.h"
#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

class JobFilesE2eTest : public OneHostClusterTest {
 protected:
  // A local file in the test's own directory; returns its path.
  std::string Local(const std::string& name, const std::string& content, mode_t mode) {
    const std::string path = local_.path() + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    chmod(path.c_str(), mode);
    return path;
  }
  TempDir local_;
};

TEST_F(JobFilesE2eTest, AJobRunsItsFileRunShGivenWithDashDashFile) {
  const std::string script = Local("run.sh", "#!/bin/sh\necho \"run.sh ran in $(basename $PWD)\"\n"
                                             "cat conf/app.ini\n", 0755);
  const std::string ini = Local("app.ini", "color = blue\n", 0644);
  auto r = cluster_->Cli(
      {"run", "--wait", "--file", script, "--file", ini + ":conf/app.ini", "--", "./run.sh"}, 60s);
  EXPECT_EQ(0, r.exit_code) << r.err;
  EXPECT_EQ("run.sh ran in work\ncolor = blue\n", r.out) << r.err;
  // As the database holds it: the executable bit became 0755, the rest 0644.
  EXPECT_EQ("0755 0644",
            db_.Scalar("select (files -> 'run.sh' ->> 'mode') || ' ' || "
                       "(files -> 'conf/app.ini' ->> 'mode') from pgfleet.jobs"));
  // With sh and an explicit mode, and a binary file (sent as base64).
  const std::string bin = Local("blob", std::string("\x00\x01\x02\xff", 4), 0600);
  auto s = cluster_->Cli({"run", "--wait", "--file", script + ":tool.sh:0700", "--file", bin,
                          "--", "sh", "-c", "test -x tool.sh && stat -c '%a %s' tool.sh blob"},
                         60s);
  EXPECT_EQ(0, s.exit_code) << s.err;
  EXPECT_EQ("700 " + std::to_string(util::ReadFile(script).size()) + "\n644 4\n", s.out) << s.err;
  EXPECT_EQ("t", db_.Scalar("select (files -> 'blob' -> 'base64')::boolean from pgfleet.jobs "
                            "where files ? 'blob'"));
}

TEST_F(JobFilesE2eTest, BadFileFlagsAreRefusedNamingTheFlagAndTheRuleAndSubmitNothing) {
  const std::string big = Local("big", std::string(2 << 20, 'x'), 0644);
  const std::string half = Local("half", std::string(600 << 10, 'x'), 0644);
  const std::string ok = Local("ok.sh", "true\n", 0755);
  struct Case {
    std::vector<std::string> flags;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"--file", big}, "--file " + big + ": files must hold at most 1 MiB in all"},
      {{"--file", half, "--file", half + ":again"}, "files must hold at most 1 MiB in all"},
      {{"--file", local_.path() + "/missing"}, "cannot open"},
      {{"--file", local_.path()}, "is not a regular file"},
      {{"--file", ok + ":/etc/cron.d/x"}, "files paths must be relative"},
      {{"--file", ok + ":../x"}, "files paths must be relative"},
      {{"--file", ok + ":x:4755"}, "files.*.mode must be octal 000-777"},
      {{"--file", ok + ":x:rwx"}, "files.*.mode must be octal 000-777"},
      {{"--file", ok + ":x:0755:extra"}, "expected LOCAL[:PATH[:MODE]]"},
      {{"--file", ""}, "expected LOCAL[:PATH[:MODE]]"},
      {{"--file", ok, "--file", ok}, "path ok.sh is given twice"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"run"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    args.insert(args.end(), {"--", "true"});
    SCOPED_TRACE(c.flags.back());
    auto r = cluster_->Cli(args);
    EXPECT_EQ(2, r.exit_code) << r.err;
    EXPECT_NE(std::string::npos, r.err.find(c.error)) << r.err;
    EXPECT_NE(std::string::npos, r.err.find("--file")) << r.err;
  }
  EXPECT_EQ(0, db_.Count("select count(*) from pgfleet.jobs"));
}

TEST_F(JobFilesE2eTest, AServiceTemplatesFilesReachItsReplicasAndAnUpdateRollsThemOut) {
  const std::string v1 = Local("serve.sh", "#!/bin/sh\necho v1 > served; exec sleep 300\n", 0755);
  auto c = cluster_->Cli({"formation", "create", "web", "--kind", "service", "--replicas", "1",
                          "--file", v1, "--", "./serve.sh"});
  ASSERT_EQ(0, c.exit_code) << c.err;
  ASSERT_TRUE(WaitFor([&] {
    return db_.Count("select count(*) from pgfleet.jobs where formation = 'web' and "
                     "state = 'running'") == 1;
  }, 30s)) << db_.Scalar("select string_agg(state || ':' || coalesce(error, ''), ',') from pgfleet.jobs");
  const std::string job = db_.Scalar("select id || '-' || attempt from pgfleet.jobs where state = 'running'");
  const std::string served = cluster_->dir() + "/h1/jobs/" + job + "/work/served";
  EXPECT_TRUE(WaitFor([&] { return util::Trim(util::ReadFileOrEmpty(served)) == "v1"; }, 10s))
      << served;
  const std::string v2 = Local("serve2.sh", "#!/bin/sh\necho v2 > served; exec sleep 300\n", 0755);
  auto u = cluster_->Cli({"formation", "update", "web", "--file", v2 + ":serve.sh"});
  ASSERT_EQ(0, u.exit_code) << u.err;
  EXPECT_EQ("files", db_.Scalar("select array_to_string(changed, ',') from "
                                "pgfleet.formation_versions where version = 2"));
  ASSERT_TRUE(WaitFor([&] {
    return db_.Count("select count(*) from pgfleet.jobs where formation = 'web' and "
                     "state = 'running' and version = 2") == 1;
  }, 60s));
  const std::string job2 = db_.Scalar(
      "select id || '-' || attempt from pgfleet.jobs where state = 'running' and version = 2");
  EXPECT_TRUE(WaitFor([&] {
    return util::Trim(util::ReadFileOrEmpty(cluster_->dir() + "/h1/jobs/" + job2 + "/work/served")) == "v2";
  }, 10s));
  cluster_->Cli({"formation", "delete", "web"});
}

TEST_F(JobFilesE2eTest, AForgedSpecWithAPathOutsideTheWorkDirFailsOnTheHostAndWritesNothing) {
  // The database refuses it; a spec forged past it (a dispatch signed with the
  // host's key) is checked again by hostd, which refuses that job alone.
  httplib::Client client(db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
  client.set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
  const std::string batch =
      R"({"jobs":[{"job":910001,"attempt":1,"spec":{"command":["true"],)"
      R"("files":{"../../escape":{"content":"x"}}}},)"
      R"({"job":910002,"attempt":1,"spec":{"command":["true"],)"
      R"("files":{"run.sh":{"content":"x","mode":"4755"}}}}]})";
  auto res = client.Post("/v1/jobs", SignDispatch(db_, "h1", batch), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(200, res->status) << res->body;
  auto results = nlohmann::json::parse(res->body)["results"];
  ASSERT_EQ(2u, results.size()) << res->body;
  EXPECT_EQ("failed", results[0]["status"]) << res->body;
  EXPECT_NE(std::string::npos, results[0]["error"].get<std::string>().find(
                                   "files paths must be relative")) << res->body;
  EXPECT_EQ("failed", results[1]["status"]) << res->body;
  EXPECT_NE(std::string::npos, results[1]["error"].get<std::string>().find(
                                   "files.*.mode must be octal 000-777")) << res->body;
  EXPECT_TRUE(Subdirs(cluster_->dir() + "/h1/jobs").empty());
  struct stat st {};
  EXPECT_NE(0, lstat((cluster_->dir() + "/h1/escape").c_str(), &st));
  EXPECT_NE(0, lstat((cluster_->dir() + "/escape").c_str(), &st));
}

// A job with 1 MiB of files travels to its host in one request (over the
// scheduler's batch size, under hostd's 4 MiB for POST /v1/jobs) and runs.
TEST_F(JobFilesE2eTest, AJobWithOneMiBOfFilesIsDispatchedAndRuns) {
  // Quotes and backslashes are escaped as two bytes: the biggest text there is.
  const std::string heavy = Local("heavy", std::string(1 << 20, '"'), 0644);
  auto r = cluster_->Cli({"run", "--wait", "--file", heavy, "--", "sh", "-c", "wc -c < heavy"}, 60s);
  EXPECT_EQ(0, r.exit_code) << r.err;
  EXPECT_EQ(std::to_string(1 << 20), util::Trim(r.out)) << r.err;
}

}  // namespace
}  // namespace pgfleet::testing
