// Metrics worth graphing (issue 39 item 4), scraped from real daemons: a
// scheduler's /metrics has the cluster's gauges (jobs and hosts by state,
// the oldest pending job's age) and the dispatch and insert-to-assigned
// histograms; a host's has its insert-to-running histogram, its
// running attempts, starts, start failures, report queue depth, fence state
// and report batch histogram; and every metric the Grafana dashboard
// (docs/grafana/pgfleet.json) graphs is one of those the daemons export.

#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;

std::string Scrape(const std::string& url) {
  httplib::Client client(url);
  auto res = client.Get("/metrics");
  return res && res->status == 200 ? res->body : "";
}

// The value of a series line `name value`, or -1 when absent.
double Value(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

class MetricsE2eTest : public OneHostClusterTest {};

TEST_F(MetricsE2eTest, DaemonsExportTheGaugesAndHistogramsTheDashboardGraphs) {
  // One job that runs, and one that waits for a host it will never find.
  auto ok = cluster_->Cli({"run", "--wait", "--", "true"});
  ASSERT_EQ(0, ok.exit_code) << ok.err;
  ASSERT_EQ(0, cluster_->Cli({"run", "--constraint", "zone=nowhere", "--", "true"}).exit_code);

  const std::string scheduler_url =
      db_.Scalar("select metrics_url from pgfleet.schedulers where id = 's1'");
  const std::string host_url = db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'");
  ASSERT_FALSE(scheduler_url.empty());
  ASSERT_FALSE(host_url.empty());
  std::string sched, host;
  // The gauges are read with the scheduler's heartbeat (every 2 s).
  ASSERT_TRUE(WaitFor(
      [&] {
        sched = Scrape(scheduler_url);
        host = Scrape(host_url);
        return Value(sched, "pgfleet_jobs{state=\"pending\"}") == 1 &&
               Value(host, "pgfleet_host_starts_total") >= 1 &&
               Value(host, "pgfleet_host_insert_to_running_seconds_count") >= 1;
      },
      20s))
      << sched << "\n---\n"
      << host;
  EXPECT_EQ(0, Value(sched, "pgfleet_jobs{state=\"running\"}")) << sched;
  EXPECT_EQ(1, Value(sched, "pgfleet_hosts{state=\"up\"}")) << sched;
  EXPECT_EQ(0, Value(sched, "pgfleet_hosts{state=\"lost\"}")) << sched;
  EXPECT_GT(Value(sched, "pgfleet_oldest_pending_job_age_seconds"), 0) << sched;
  EXPECT_NE(sched.find("# TYPE pgfleet_scheduler_dispatch_seconds histogram"), std::string::npos);
  EXPECT_GE(Value(sched, "pgfleet_scheduler_dispatch_seconds_count"), 1) << sched;
  // Start latency on the database's clock: the job that ran was assigned and
  // reported running once each (a first attempt); the one that waits was not.
  EXPECT_EQ(1, Value(sched, "pgfleet_scheduler_insert_to_assigned_seconds_count")) << sched;
  EXPECT_EQ(1, Value(host, "pgfleet_host_insert_to_running_seconds_count")) << host;
  const double assigned_after = Value(sched, "pgfleet_scheduler_insert_to_assigned_seconds_sum");
  const double running_after = Value(host, "pgfleet_host_insert_to_running_seconds_sum");
  EXPECT_GT(assigned_after, 0) << sched;
  EXPECT_LT(assigned_after, 20) << sched;
  EXPECT_GE(running_after, assigned_after) << host;
  EXPECT_EQ(0, Value(host, "pgfleet_host_start_failures_total")) << host;
  EXPECT_EQ(0, Value(host, "pgfleet_host_running_attempts")) << host;
  EXPECT_EQ(0, Value(host, "pgfleet_host_fenced")) << host;
  EXPECT_GE(Value(host, "pgfleet_host_report_queue_depth"), 0) << host;
  EXPECT_GE(Value(host, "pgfleet_host_report_batch_seconds_count"), 1) << host;

  // Every metric an expression of the dashboard names is exported.
  std::ifstream in(SourcePath("docs/grafana/pgfleet.json"));
  ASSERT_TRUE(in);
  const auto dashboard = nlohmann::json::parse(in);
  const std::string exported = sched + host;
  std::set<std::string> named;
  const std::regex metric("pgfleet_[a-z_]+");
  for (const auto& panel : dashboard.at("panels")) {
    ASSERT_FALSE(panel.at("targets").empty()) << panel.dump();
    for (const auto& target : panel.at("targets")) {
      const std::string expr = target.at("expr").get<std::string>();
      for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it) {
        named.insert(it->str());
      }
    }
  }
  EXPECT_GE(named.size(), 10u);
  for (const std::string& name : named) {
    EXPECT_NE(exported.find("\n" + name), std::string::npos)
        << name << " is graphed but no daemon exports it";
  }
}

// pgfleet status --watch refreshes: --count N summaries, each read anew (a
// job submitted between them shows in the later ones), one JSON object per
// line with --json; bad values are refused naming the flag.
TEST_F(MetricsE2eTest, StatusWatchRefreshesAndRefusesBadValues) {
  auto two = cluster_->Cli({"status", "--watch", "--interval", "200ms", "--count", "2"}, 30s);
  ASSERT_EQ(0, two.exit_code) << two.err;
  size_t headers = 0;
  for (size_t at = two.out.find("pgfleet status at "); at != std::string::npos;
       at = two.out.find("pgfleet status at ", at + 1)) {
    ++headers;
  }
  EXPECT_EQ(2u, headers) << two.out;
  EXPECT_NE(two.out.find("(every 200ms)"), std::string::npos) << two.out;
  auto json = cluster_->Cli({"status", "--watch", "--json", "--interval", "0.1", "--count", "3"});
  ASSERT_EQ(0, json.exit_code) << json.err;
  std::istringstream lines(json.out);
  int objects = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    auto doc = nlohmann::json::parse(line);
    EXPECT_TRUE(doc.contains("cluster")) << line;
    ++objects;
  }
  EXPECT_EQ(3, objects) << json.out;
  for (const auto& [args, words] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"status", "--watch", "--interval", "10ms"}, "--interval must be from 100ms to 1h"},
           {{"status", "--watch", "--interval", "2x"}, "--interval must be a positive duration"},
           {{"status", "--watch", "--count", "-1"}, "--count must be from 0 to 1000000"},
           {{"status", "--count", "2"}, "--interval and --count need --watch"}}) {
    auto r = cluster_->Cli(args);
    EXPECT_EQ(2, r.exit_code) << args.back() << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace pgfleet::testing
