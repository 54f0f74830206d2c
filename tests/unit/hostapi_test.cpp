// hostd's HTTP contract (core/hostapi/hostapi.h): what schedulerd encodes,
// hostd decodes as it was; what is not a batch names the field; paths are
// spelled the same for callers and routes.

#include "core/hostapi/hostapi.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

namespace pgfleet::hostapi {
namespace {

TEST(HostApi, ADispatchRoundTripsJobsAttemptsSpecsUidsAndTickets) {
  const std::string spec1 = R"({"command":["sh","-c","echo \"hi\""],"env":{"K":"v\u00e9"}})";
  const std::string spec2 = R"({"command":["true"],"disk":64,"seccomp":"default"})";
  std::vector<OutgoingJob> out = {{7, 1, spec1, "uid-7", "t7"},
                                  {8, 3, spec2, "", "t.8\"quoted\""},
                                  {9, 2147483647, spec2, "u\n9", "t9"}};
  std::vector<size_t> first;
  auto bodies = EncodeDispatch(out, 1 << 20, &first);
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_EQ(first, std::vector<size_t>{0});
  auto in = DecodeDispatch(bodies[0]);
  ASSERT_EQ(in.size(), 3u);
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(in[i].job, out[i].job);
    EXPECT_EQ(in[i].attempt, out[i].attempt);
    EXPECT_EQ(in[i].ticket, out[i].ticket);
    EXPECT_EQ(in[i].spec.uid, out[i].uid);
    EXPECT_EQ(in[i].refused, "");
  }
  EXPECT_EQ(in[0].spec.command, (std::vector<std::string>{"sh", "-c", "echo \"hi\""}));
  EXPECT_EQ(in[0].spec.env.at("K"), "v\xc3\xa9");
  EXPECT_EQ(in[1].spec.disk, 64);
}

TEST(HostApi, BodiesAreSplitAtTheLimitAndAJobLargerThanItGoesAlone) {
  const std::string small = R"({"command":["true"]})";
  const std::string big = R"({"command":["echo",")" + std::string(500, 'x') + R"("]})";
  std::vector<OutgoingJob> out;
  for (int i = 1; i <= 10; ++i) out.push_back({i, 1, i == 5 ? big : small, "", "t"});
  std::vector<size_t> first;
  auto bodies = EncodeDispatch(out, 200, &first);
  ASSERT_EQ(bodies.size(), first.size());
  size_t decoded = 0;
  for (size_t b = 0; b < bodies.size(); ++b) {
    auto jobs = DecodeDispatch(bodies[b]);
    ASSERT_FALSE(jobs.empty());
    EXPECT_EQ(jobs.front().job, out[first[b]].job);
    if (jobs.size() > 1) {
      EXPECT_LE(bodies[b].size(), 200u) << b;
    }
    decoded += jobs.size();
  }
  EXPECT_EQ(decoded, out.size());
  EXPECT_TRUE(EncodeDispatch({}, 200, &first).empty());
  EXPECT_TRUE(first.empty());
}

TEST(HostApi, WhatIsNotABatchNamesTheFieldAndABadSpecRefusesOnlyItsJob) {
  for (auto [body, field] : std::vector<std::pair<std::string, std::string>>{
           {"", "body"},
           {"[]", "jobs"},
           {R"({"jobs":{}})", "jobs"},
           {R"({"jobs":[1]})", "jobs[0]"},
           {R"({"jobs":[{"attempt":1,"spec":{},"ticket":"t"}]})", "jobs[0].job"},
           {R"({"jobs":[{"job":0,"attempt":1,"spec":{},"ticket":"t"}]})", "jobs[0].job"},
           {R"({"jobs":[{"job":1,"attempt":2147483648,"spec":{},"ticket":"t"}]})",
            "jobs[0].attempt"},
           {R"({"jobs":[{"job":1,"attempt":1,"ticket":"t"}]})", "jobs[0].spec"},
           {R"({"jobs":[{"job":1,"attempt":1,"spec":{}}]})", "jobs[0].ticket"},
           // Empty is none: EncodeDispatch leaves it out (found by dispatch_fuzz).
           {R"({"jobs":[{"job":1,"attempt":1,"spec":{},"ticket":""}]})", "jobs[0].ticket"},
           {R"({"jobs":[{"job":1,"attempt":1,"spec":{},"ticket":"t","uid":5}]})", "jobs[0].uid"},
       }) {
    try {
      DecodeDispatch(body);
      ADD_FAILURE() << body << " was taken";
    } catch (const model::SpecError& e) {
      EXPECT_EQ(e.field(), field) << body << ": " << e.what();
    }
  }
  auto jobs = DecodeDispatch(
      R"({"jobs":[{"job":1,"attempt":1,"spec":{"command":[]},"ticket":"t"},)"
      R"({"job":2,"attempt":1,"spec":{"command":["true"]},"ticket":"t"}]})");
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_NE(jobs[0].refused.find("invalid job spec: command"), std::string::npos)
      << jobs[0].refused;
  EXPECT_EQ(jobs[1].refused, "");
}

TEST(HostApi, CallersPathsMatchTheRoutesHostdServes) {
  auto matches = [](const std::string& path, const char* route) {
    std::string p = path.substr(0, path.find('?'));
    return std::regex_match(p, std::regex(route));
  };
  EXPECT_TRUE(matches(JobPath(42), kJobRoute));
  EXPECT_TRUE(matches(StopPath(42, 3, true), kStopRoute));
  EXPECT_EQ(StopPath(42, 3, true), "/v1/jobs/42/stop?attempt=3&force=1");
  EXPECT_EQ(StopPath(42, 3, false), "/v1/jobs/42/stop?attempt=3");
  EXPECT_TRUE(matches(LogsPath(42, 1), kLogsRoute));
  EXPECT_TRUE(matches(FsPath(42, "/a b", 0), kFsRoute));
  EXPECT_EQ(FsPath(42, "/a b&c", 2), "/v1/jobs/42/fs?path=/a%20b%26c&attempt=2");
  EXPECT_TRUE(matches(ExecPath(42), kExecRoute));
  EXPECT_TRUE(matches(ExecStdinPath(42), kExecStdinRoute));
  EXPECT_FALSE(matches(ExecStdinPath(42), kExecRoute));
}

}  // namespace
}  // namespace pgfleet::hostapi
