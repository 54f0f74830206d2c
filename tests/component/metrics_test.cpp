// core/metrics: the Prometheus text a scrape gets - counters, gauges with
// labels, histograms with cumulative buckets, one HELP and TYPE per base name.

#include "core/metrics/metrics.h"

#include <gtest/gtest.h>

#include <string>

namespace pgfleet::metrics {
namespace {

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Metrics, HistogramBucketsAreCumulativeWithSumAndCount) {
  Registry r;
  r.Describe("pgfleet_dispatch_seconds", "How long a dispatch took.");
  for (double v : {0.0005, 0.003, 0.003, 0.2, 120.0}) r.Observe("pgfleet_dispatch_seconds", v);
  const std::string text = r.Render();
  EXPECT_NE(text.find("# HELP pgfleet_dispatch_seconds How long a dispatch took.\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# TYPE pgfleet_dispatch_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("pgfleet_dispatch_seconds_bucket{le=\"0.001\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("pgfleet_dispatch_seconds_bucket{le=\"0.005\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("pgfleet_dispatch_seconds_bucket{le=\"0.25\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("pgfleet_dispatch_seconds_bucket{le=\"60\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("pgfleet_dispatch_seconds_bucket{le=\"+Inf\"} 5\n"), std::string::npos);
  EXPECT_NE(text.find("pgfleet_dispatch_seconds_count 5\n"), std::string::npos);
  EXPECT_NE(text.find("pgfleet_dispatch_seconds_sum 120.2065"), std::string::npos) << text;
  EXPECT_EQ(5, r.Get("pgfleet_dispatch_seconds"));
}

TEST(Metrics, LabelledSeriesShareOneHelpAndTypeEvenWhenAnotherNameSortsBetween) {
  Registry r;
  r.Set("pgfleet_jobs{state=\"pending\"}", 3);
  r.Set("pgfleet_jobs{state=\"running\"}", 7);
  r.Add("pgfleet_jobs_total", 2);  // sorts between "pgfleet_jobs" and "pgfleet_jobs{"
  r.Observe("pgfleet_wait_seconds{kind=\"assign\"}", 0.02);
  const std::string text = r.Render();
  EXPECT_EQ(1u, Occurrences(text, "# TYPE pgfleet_jobs gauge\n")) << text;
  EXPECT_EQ(1u, Occurrences(text, "# TYPE pgfleet_jobs_total counter\n")) << text;
  EXPECT_NE(text.find("pgfleet_jobs{state=\"pending\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("pgfleet_jobs{state=\"running\"} 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("pgfleet_wait_seconds_bucket{kind=\"assign\",le=\"0.025\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("pgfleet_wait_seconds_count{kind=\"assign\"} 1\n"), std::string::npos)
      << text;
  // The gauge's series come right after its one TYPE line.
  EXPECT_LT(text.find("# TYPE pgfleet_jobs gauge"), text.find("pgfleet_jobs{state=\"pending\"}"));
  EXPECT_GT(text.find("# TYPE pgfleet_jobs_total"), text.find("pgfleet_jobs{state=\"running\"}"));
}

}  // namespace
}  // namespace pgfleet::metrics
