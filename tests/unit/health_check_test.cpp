// The health check spec (core/model/health_check.h): its rules, hostile
// values refused naming the field, and the state machine hostd runs every
// attempt's checks through (thresholds, grace, flips).

#include "core/model/health_check.h"

#include <gtest/gtest.h>

#include <string>

#include "core/model/job_spec.h"
#include "core/model/report.h"

namespace pgfleet::model {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

void ExpectRefused(const json& check, const std::string& field, const std::string& needle) {
  SCOPED_TRACE(check.dump().substr(0, 200));
  try {
    ParseJobSpec(json{{"command", {"true"}}, {"health_check", check}});
    ADD_FAILURE() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), field);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(HealthCheckSpec, ParsesEachTypeWithDefaults) {
  auto s = ParseJobSpec(json::parse(
      R"({"command":["srv"],"health_check":{"type":"command","command":["cat","/ready"]}})"));
  ASSERT_TRUE(s.health_check);
  EXPECT_EQ(s.health_check->type, HealthCheckType::kCommand);
  EXPECT_EQ(s.health_check->command, (std::vector<std::string>{"cat", "/ready"}));
  EXPECT_EQ(s.health_check->interval_seconds, 10);
  EXPECT_EQ(s.health_check->timeout_seconds, 2);
  EXPECT_EQ(s.health_check->failure_threshold, 3);
  EXPECT_EQ(s.health_check->grace_seconds, 0);

  auto http = ParseHealthCheck(json::parse(
      R"({"type":"http","port":8080,"path":"/healthz","interval_seconds":1,"grace_seconds":5})"));
  EXPECT_EQ(http.port, 8080);
  EXPECT_EQ(http.path, "/healthz");
  EXPECT_EQ(http.interval_seconds, 1);
  EXPECT_EQ(http.grace_seconds, 5);
  EXPECT_EQ(ParseHealthCheck(json::parse(R"({"type":"http","port":80})")).path, "/");
  EXPECT_EQ(ParseHealthCheck(json::parse(R"({"type":"tcp","port":6379})")).type,
            HealthCheckType::kTcp);
}

TEST(HealthCheckSpec, RoundTripsThroughJson) {
  auto c = ParseHealthCheck(json::parse(
      R"({"type":"http","port":8080,"path":"/h","timeout_seconds":4,"failure_threshold":2})"));
  EXPECT_EQ(ToJson(ParseHealthCheck(ToJson(c))), ToJson(c));
  JobSpec s = ParseJobSpec(json{{"command", {"x"}}, {"health_check", ToJson(c)}});
  EXPECT_EQ(ParseJobSpec(ToJson(s)).health_check->port, 8080);
  // No check: null in the spec's JSON, as pgfleet.job_spec_json writes it.
  EXPECT_TRUE(ToJson(ParseJobSpec(json{{"command", {"x"}}}))["health_check"].is_null());
  EXPECT_FALSE(ParseJobSpec(json{{"command", {"x"}}, {"health_check", nullptr}}).health_check);
}

TEST(HealthCheckSpec, RefusesHostileValuesNamingTheField) {
  ExpectRefused(json::array({1}), "health_check", "must be an object");
  ExpectRefused("cat /ready", "health_check", "must be an object");
  ExpectRefused(json{{"type", "exec"}}, "health_check.type", "command, http or tcp");
  ExpectRefused(json{{"type", 7}}, "health_check.type", "must be a string");
  ExpectRefused(json{{"type", "tcp"}, {"port", 0}}, "health_check.port", "between 1 and 65535");
  ExpectRefused(json{{"type", "tcp"}, {"port", 70000}}, "health_check.port", "between 1 and 65535");
  ExpectRefused(json{{"type", "http"}, {"port", "80"}}, "health_check.port", "must be an integer");
  ExpectRefused(json{{"type", "tcp"}}, "health_check.port", "between 1 and 65535");
  ExpectRefused(json{{"type", "tcp"}, {"port", 1}, {"interval_seconds", -1}},
                "health_check.interval_seconds", "between 1 and 86400");
  ExpectRefused(json{{"type", "tcp"}, {"port", 1}, {"timeout_seconds", 0}},
                "health_check.timeout_seconds", "between 1 and 3600");
  ExpectRefused(json{{"type", "tcp"}, {"port", 1}, {"failure_threshold", 0}},
                "health_check.failure_threshold", "between 1 and 100");
  ExpectRefused(json{{"type", "tcp"}, {"port", 1}, {"grace_seconds", -5}},
                "health_check.grace_seconds", "between 0 and 86400");
  ExpectRefused(json{{"type", "tcp"}, {"port", 1}, {"interval_seconds", 1e12}},
                "health_check.interval_seconds", "must be an integer");
  ExpectRefused(json{{"type", "tcp"}, {"port", 1}, {"interval_seconds", 99999999999LL}},
                "health_check.interval_seconds", "32 bits");
  ExpectRefused(json{{"type", "command"}}, "health_check.command", "must be given");
  ExpectRefused(json{{"type", "command"}, {"command", json::array()}}, "health_check.command",
                "non-empty");
  ExpectRefused(json{{"type", "command"}, {"command", {""}}}, "health_check.command", "non-empty");
  ExpectRefused(json{{"type", "command"}, {"command", {1, 2}}}, "health_check.command",
                "array of strings");
  ExpectRefused(json{{"type", "command"}, {"command", {std::string("a\0b", 3)}}},
                "health_check.command", "NUL");
  ExpectRefused(json{{"type", "command"}, {"command", {std::string(5000, 'x')}}},
                "health_check.command", "at most 4096 bytes");
  ExpectRefused(json{{"type", "command"}, {"command", std::vector<std::string>(65, "x")}},
                "health_check.command", "at most 64 arguments");
  ExpectRefused(json{{"type", "command"}, {"command", {"x"}}, {"port", 80}}, "health_check.port",
                "http or tcp only");
  ExpectRefused(json{{"type", "tcp"}, {"port", 80}, {"command", {"x"}}}, "health_check.command",
                "command only");
  ExpectRefused(json{{"type", "tcp"}, {"port", 80}, {"path", "/"}}, "health_check.path",
                "http only");
  ExpectRefused(json{{"type", "http"}, {"port", 80}, {"path", "healthz"}}, "health_check.path",
                "start with /");
  ExpectRefused(json{{"type", "http"}, {"port", 80}, {"path", "/a b\r\nX: y"}}, "health_check.path",
                "printable");
  ExpectRefused(json{{"type", "http"}, {"port", 80}, {"path", "/" + std::string(2000, 'a')}},
                "health_check.path", "at most 1024");
  ExpectRefused(json{{"type", "tcp"}, {"port", 1}, {"retries", 3}}, "health_check",
                "unknown field retries");
}

HealthCheck Check(int threshold, int interval = 10, int grace = 0) {
  HealthCheck c;
  c.type = HealthCheckType::kTcp;
  c.port = 80;
  c.failure_threshold = threshold;
  c.interval_seconds = interval;
  c.grace_seconds = grace;
  return c;
}

TEST(HealthTracker, UnhealthyOnlyAfterThresholdFailuresInARow) {
  const auto t0 = Clock::now();
  HealthTracker t(Check(3), t0);
  EXPECT_EQ(t.health(), Health::kUnknown);
  EXPECT_FALSE(t.Result(false, t0));  // 1: still unknown
  EXPECT_FALSE(t.Result(false, t0));  // 2
  EXPECT_TRUE(t.Result(false, t0));   // 3: unhealthy, a flip
  EXPECT_EQ(t.health(), Health::kUnhealthy);
  EXPECT_TRUE(t.Failed());
  EXPECT_EQ(t.consecutive_failures(), 3);
  EXPECT_FALSE(t.Result(false, t0));  // stays unhealthy: no flip to report
}

TEST(HealthTracker, HealthyAfterOneSuccessAndASuccessResetsTheCount) {
  const auto t0 = Clock::now();
  HealthTracker t(Check(2), t0);
  EXPECT_TRUE(t.Result(true, t0));    // unknown -> healthy
  EXPECT_FALSE(t.Result(true, t0));   // holds: nothing to report
  EXPECT_FALSE(t.Result(false, t0));  // one failure: still healthy
  EXPECT_EQ(t.health(), Health::kHealthy);
  EXPECT_FALSE(t.Result(true, t0));  // the count starts again
  EXPECT_FALSE(t.Result(false, t0));
  EXPECT_TRUE(t.Result(false, t0));  // two in a row: unhealthy
  EXPECT_TRUE(t.Result(true, t0));   // and one success: healthy again
  EXPECT_EQ(t.health(), Health::kHealthy);
}

TEST(HealthTracker, NoCheckDuringGraceThenOneEveryIntervalOneInFlight) {
  const auto t0 = Clock::now();
  HealthTracker t(Check(3, 10, 30), t0);
  EXPECT_FALSE(t.Due(t0));
  EXPECT_FALSE(t.Due(t0 + seconds(29)));
  EXPECT_TRUE(t.Due(t0 + seconds(30)));
  t.Started(t0 + seconds(30));
  EXPECT_FALSE(t.Due(t0 + seconds(100)));  // in flight: never two at once
  t.Result(true, t0 + seconds(31));
  EXPECT_FALSE(t.Due(t0 + seconds(39)));
  EXPECT_TRUE(t.Due(t0 + seconds(40)));
  // A check that outlasted its interval: the next is due at its end, not before.
  t.Started(t0 + seconds(40));
  t.Result(true, t0 + seconds(65));
  EXPECT_TRUE(t.Due(t0 + seconds(65)));
}

TEST(HealthReport, RoundTripsAndIsNoEnd) {
  Report r = Report::HealthChanged(7, 2, Health::kUnhealthy, "exit code 1");
  r.uid = "u";
  json j = ToJson(r);
  EXPECT_EQ(j["kind"], "health");
  EXPECT_EQ(j["health"], "unhealthy");
  EXPECT_EQ(j["output"], "exit code 1");
  Report back = ReportFromJson(j);
  EXPECT_EQ(back.kind, ReportKind::kHealth);
  EXPECT_EQ(back.health, Health::kUnhealthy);
  EXPECT_EQ(back.output, "exit code 1");
  EXPECT_FALSE(back.final());
  j["health"] = "unknown";
  EXPECT_THROW(ReportFromJson(j), std::invalid_argument);
  j["health"] = 3;
  EXPECT_THROW(ReportFromJson(j), std::invalid_argument);
}

TEST(HealthStopReason, QuotesTheOutput) {
  EXPECT_EQ(HealthStopReason(3, "exit code 1"), "health check failed 3 times: exit code 1");
  EXPECT_EQ(HealthStopReason(1, ""), "health check failed 1 time");
}

}  // namespace
}  // namespace pgfleet::model
