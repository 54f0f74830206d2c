#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "core/model/driver_kind.h"
#include "core/model/report.h"
#include "core/model/states.h"

namespace pgfleet::model {
namespace {

TEST(States, EveryJobStateRoundTripsThroughItsName) {
  for (auto s : {JobState::kPending, JobState::kAssigned, JobState::kRunning, JobState::kSucceeded,
                 JobState::kFailed, JobState::kCancelled}) {
    EXPECT_EQ(s, ParseJobState(ToString(s)).value()) << ToString(s);
  }
  EXPECT_FALSE(ParseJobState("Running").has_value());
  EXPECT_FALSE(ParseJobState("").has_value());
  EXPECT_TRUE(IsFinal(JobState::kCancelled));
  EXPECT_FALSE(IsFinal(JobState::kRunning));
}

TEST(States, AttemptStatesOutcomesAndReportKindsRoundTrip) {
  for (auto s : {AttemptState::kStarting, AttemptState::kRunning, AttemptState::kStopping,
                 AttemptState::kExited, AttemptState::kStartFailed, AttemptState::kLost}) {
    EXPECT_EQ(s, ParseAttemptState(ToString(s)).value());
  }
  for (auto o : {ExitOutcome::kExited, ExitOutcome::kStartFailed, ExitOutcome::kLost}) {
    EXPECT_EQ(o, ParseExitOutcome(ToString(o)).value());
    // The outcome, the attempt state it leads to and its report share one name.
    EXPECT_EQ(ToString(o), ToString(StateAfter(o)));
    EXPECT_EQ(ToString(o), ToString(ReportKindOf(o)));
    EXPECT_FALSE(IsLive(StateAfter(o)));
  }
  for (auto k : {ReportKind::kRunning, ReportKind::kExited, ReportKind::kStartFailed,
                 ReportKind::kLost, ReportKind::kHealth}) {
    EXPECT_EQ(k, ParseReportKind(ToString(k)).value());
  }
  for (auto r : {ReplicaState::kPending, ReplicaState::kAssigned, ReplicaState::kRunning}) {
    EXPECT_EQ(r, ParseReplicaState(ToString(r)).value());
    EXPECT_TRUE(ParseJobState(ToString(r)).has_value());  // a replica state is a job state
  }
  EXPECT_FALSE(ParseReplicaState("succeeded").has_value());
}

TEST(Report, RunningIsWrittenWithItsPidOnly) {
  auto j = ToJson(Report::Running(7, 2, 4242));
  EXPECT_EQ(R"({"attempt":2,"job":7,"kind":"running","pid":4242})", j.dump());
}

// Every kind carries the job's uid when the host knows it: a running report
// without it was applied to another database's job of the same id and
// attempt (JobIdentityTest, under ASan's timing), which was then lost.
TEST(Report, EveryKindCarriesTheJobsUid) {
  for (Report r : {Report::Running(7, 2, 4242), Report::Lost(7, 2, "gone"),
                   Report::StartFailed(7, 2, "no such file")}) {
    r.uid = "5bc77840-f10c-46fd-8726-a2955a162b89";
    EXPECT_EQ(r.uid, ToJson(r)["uid"]) << ToJson(r).dump();
    EXPECT_EQ(r.uid, ReportFromJson(ToJson(r)).uid);
  }
  Report exited;
  exited.job = 7;
  exited.attempt = 2;
  exited.kind = ReportKind::kExited;
  exited.uid = "5bc77840-f10c-46fd-8726-a2955a162b89";
  EXPECT_EQ(exited.uid, ReportFromJson(ToJson(exited)).uid);
}

TEST(Report, ExitedWritesNullForNoExitCodeAndNoSignal) {
  Report r;
  r.job = 1;
  r.attempt = 1;
  r.kind = ReportKind::kExited;
  r.signal = 9;
  r.oom_killed = true;
  r.output_tail = "bye\n";
  auto j = ToJson(r);
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(9, j["signal"]);
  EXPECT_TRUE(j["error"].is_null());
  Report back = ReportFromJson(j);
  EXPECT_EQ(-1, back.exit_code);
  EXPECT_EQ(9, back.signal);
  EXPECT_TRUE(back.oom_killed);
  EXPECT_EQ("bye\n", back.output_tail);
  EXPECT_TRUE(back.final());
}

TEST(Report, LostAndStartFailedCarryTheirError) {
  auto lost = ReportFromJson(ToJson(Report::Lost(3, 4, "shim gone")));
  EXPECT_EQ(ReportKind::kLost, lost.kind);
  EXPECT_EQ("shim gone", lost.error);
  auto failed = ReportFromJson(ToJson(Report::StartFailed(3, 4, "exec: no such file")));
  EXPECT_EQ(ReportKind::kStartFailed, failed.kind);
}

// Found by fuzz/report_fuzz: a float or out-of-range number where an int
// belongs was converted anyway (undefined behaviour for 5.8e80).
TEST(Report, NumbersThatDoNotFitTheirFieldAreRefusedNamingIt) {
  auto exited = [](const char* field, nlohmann::json v) {
    nlohmann::json j{{"job", 1}, {"attempt", 1}, {"kind", "exited"}};
    j[field] = v;
    return j;
  };
  for (const auto& [field, v, rule] :
       std::vector<std::tuple<const char*, nlohmann::json, std::string>>{
           {"exit_code", 5.77778e+80, "must be an integer"},
           {"exit_code", 1.5, "must be an integer"},
           {"exit_code", 4294967296LL, "is out of range"},
           {"signal", -4294967296LL, "is out of range"},
           {"attempt", 18446744073709551615ULL, "is out of range"},
           {"pid", 2.0, "must be an integer"}}) {
    try {
      ReportFromJson(exited(field, v));
      ADD_FAILURE() << field << " = " << v.dump() << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string("report ") + field + " " + rule, e.what());
    }
  }
}

TEST(Report, DecodingNamesTheBadField) {
  try {
    ReportFromJson(nlohmann::json{{"job", "x"}, {"attempt", 1}, {"kind", "running"}});
    FAIL() << "accepted a string job id";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ("report job must be an integer", e.what());
  }
  EXPECT_THROW(ReportFromJson(nlohmann::json{{"job", 1}, {"attempt", 1}, {"kind", "done"}}),
               std::invalid_argument);
  EXPECT_THROW(ReportFromJson(nlohmann::json::array()), std::invalid_argument);
}

}  // namespace
}  // namespace pgfleet::model

namespace pgfleet::model {
namespace {

// What each driver can do is said once (driver_kind.h); hostd asks this,
// never the name.
TEST(DriverKind, EachKindSaysWhatItCanDoAndNamesRoundTrip) {
  DriverCapabilities process = CapabilitiesOf(DriverKind::kProcess);
  EXPECT_TRUE(process.runs_processes);
  EXPECT_FALSE(process.isolates || process.has_cgroup || process.has_own_root ||
               process.maps_job_ids || process.enforces_disk);
  DriverCapabilities container = CapabilitiesOf(DriverKind::kContainer);
  EXPECT_TRUE(container.runs_processes && container.isolates && container.has_cgroup &&
              container.has_own_root && container.maps_job_ids && container.enforces_disk);
  DriverCapabilities sim = CapabilitiesOf(DriverKind::kSim);
  EXPECT_FALSE(sim.runs_processes || sim.has_cgroup || sim.has_own_root);
  EXPECT_TRUE(sim.isolates) << "sim jobs run nothing: any submitter's may be placed there";
  for (auto kind : {DriverKind::kProcess, DriverKind::kContainer, DriverKind::kSim}) {
    EXPECT_EQ(ParseDriverKind(DriverKindName(kind)), kind);
  }
  for (const char* bad : {"", "Container", "auto", "kvm", "container "}) {
    EXPECT_FALSE(ParseDriverKind(bad)) << bad;
  }
}

}  // namespace
}  // namespace pgfleet::model
