// sql/ops/ (the operators' psql toolkit, issue 39 item 5): every query runs
// with psql as its README shows (psql -v NAME=VALUE -f FILE) against a real
// cluster's schema holding a host, jobs that ran, failed and were lost, and
// answers the question its comment asks; the README's menu lists them all.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// psql with ON_ERROR_STOP, as an operator would run the file.
testing::CommandResult Psql(const TestDatabase& db, const std::string& file,
                            const std::vector<std::string>& vars) {
  std::vector<std::string> argv = {"/usr/bin/env", "psql", db.dsn(), "-X", "-v", "ON_ERROR_STOP=1"};
  for (const auto& v : vars) {
    argv.push_back("-v");
    argv.push_back(v);
  }
  argv.push_back("-f");
  argv.push_back(testing::SourcePath("sql/ops/" + file));
  return testing::Run(argv);
}

std::set<std::string> OpsFiles() {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(testing::SourcePath("sql/ops"))) {
    if (e.path().extension() == ".sql") out.insert(e.path().filename().string());
  }
  return out;
}

TEST(OpsQueries, EveryQueryRunsAsTheMenuShowsItAndSaysWhatItAnswers) {
  TestDatabase db;
  Sql admin(db);
  admin.RegisterHost("host-1", 4000, 4096);
  long long ok = admin.Submit(500);
  long long bad = admin.Submit(500);
  long long lost = admin.Submit(500);
  long long waiting = admin.Submit(500, 64, 1, "reports");
  admin.Exec("update pgfleet.jobs set constraints = '{\"zone\": \"nowhere\"}' where id = $1",
             waiting);
  admin.Assign({ok, bad, lost}, "host-1");
  long long gen = admin.Num("select generation from pgfleet.hosts where id = 'host-1'");
  ASSERT_TRUE(admin.ReportOne("host-1", gen, Running(ok, 1)));
  ASSERT_TRUE(admin.ReportOne("host-1", gen, Exited(ok, 1, 0)));
  ASSERT_TRUE(admin.ReportOne("host-1", gen, Running(bad, 1)));
  ASSERT_TRUE(admin.ReportOne("host-1", gen, Exited(bad, 1, 3)));
  ASSERT_TRUE(admin.ReportOne("host-1", gen, Running(lost, 1)));
  ASSERT_TRUE(admin.ReportOne(
      "host-1", gen,
      {{"job", lost}, {"attempt", 1}, {"kind", "lost"}, {"error", "shim vanished"}}));

  const std::string menu = ReadFile(testing::SourcePath("sql/ops/README.md"));
  const std::set<std::string> files = OpsFiles();
  ASSERT_GE(files.size(), 9u);
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    const std::string text = ReadFile(testing::SourcePath("sql/ops/" + f));
    // The first line is the question and how to run it.
    ASSERT_EQ(text.rfind("-- ", 0), 0u) << text;
    const std::string first = text.substr(0, text.find('\n'));
    EXPECT_NE(first.find('?'), std::string::npos) << first;
    EXPECT_NE(first.find("psql "), std::string::npos) << first;
    EXPECT_NE(menu.find("sql/ops/" + f), std::string::npos) << "not in sql/ops/README.md";
    auto r = Psql(db, f, {"job=" + std::to_string(waiting), "host=host-1"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.err, "") << r.err;
  }

  // And what they answer, for the jobs above.
  auto ran = Psql(db, "ran_on_host.sql", {"host=host-1"});
  EXPECT_NE(ran.out.find("(3 rows)"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("succeeded"), std::string::npos) << ran.out;
  auto why = Psql(db, "why_pending.sql", {"job=" + std::to_string(waiting)});
  EXPECT_NE(why.out.find("nowhere"), std::string::npos) << why.out;
  auto lost_day = Psql(db, "lost_per_host_per_day.sql", {});
  EXPECT_NE(lost_day.out.find("host-1"), std::string::npos) << lost_day.out;
  EXPECT_NE(lost_day.out.find("(1 row)"), std::string::npos) << lost_day.out;
  auto users = Psql(db, "top_users.sql", {});
  EXPECT_NE(users.out.find("(1 row)"), std::string::npos) << users.out;
}

// A variable the query needs and the caller left out is an error psql names,
// not a query over everything.
TEST(OpsQueries, AQueryMissingItsVariableFailsNamingIt) {
  TestDatabase db;
  auto r = Psql(db, "ran_on_host.sql", {});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("host"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace pgfleet::integration
