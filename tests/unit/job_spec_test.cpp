#include "core/model/job_spec.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "core/model/json_limits.h"

namespace pgfleet::model {
namespace {

using nlohmann::json;

// A valid spec with `field` set to `value`.
json With(const std::string& field, json value) {
  json j = {{"command", {"true"}}};
  j[field] = std::move(value);
  return j;
}

// Parses `j`, expecting a SpecError for `field` whose message contains every
// one of `needles`.
void ExpectRejected(const json& j, const std::string& field,
                    std::initializer_list<std::string> needles) {
  SCOPED_TRACE(j.dump());
  try {
    ParseJobSpec(j);
    ADD_FAILURE() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), field);
    const std::string what = e.what();
    EXPECT_NE(what.find(field), std::string::npos) << what;
    for (const auto& needle : needles) EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

TEST(ParseJobSpec, AcceptsMinimalSpecWithDefaults) {
  const JobSpec s = ParseJobSpec(json::parse(R"({"command":["true"]})"));
  EXPECT_EQ(s.command, std::vector<std::string>{"true"});
  EXPECT_TRUE(s.env.empty());
  EXPECT_EQ(s.cpu, kDefaultCpu);
  EXPECT_EQ(s.memory, kDefaultMemory);
  EXPECT_TRUE(s.constraints.empty());
  EXPECT_EQ(s.priority, kDefaultPriority);
  EXPECT_EQ(s.max_attempts, 1);
  EXPECT_EQ(s.formation, "default");
  EXPECT_EQ(s.rootfs, "");
  EXPECT_EQ(s.user, "");
  EXPECT_EQ(s.network, "host");
  EXPECT_EQ(s.pids_max, kDefaultPidsMax);
  EXPECT_FALSE(s.cpu_hard_limit);
  EXPECT_EQ(s.stop_grace_seconds, kDefaultStopGraceSeconds);
}

TEST(ParseJobSpec, NullFieldsTakeTheirDefaults) {
  const JobSpec s = ParseJobSpec(With("cpu", nullptr));
  EXPECT_EQ(s.cpu, kDefaultCpu);
}

TEST(ParseJobSpec, AcceptsTheBoundaries) {
  EXPECT_EQ(ParseJobSpec(With("priority", 0)).priority, 0);
  EXPECT_EQ(ParseJobSpec(With("priority", 100)).priority, 100);
  EXPECT_EQ(ParseJobSpec(With("cpu", 1)).cpu, 1);
  EXPECT_EQ(ParseJobSpec(With("memory", 1)).memory, 1);
  EXPECT_EQ(ParseJobSpec(With("network", "none")).network, "none");
  EXPECT_EQ(ParseJobSpec(With("stop_grace_seconds", 0)).stop_grace_seconds, 0);
}

TEST(ParseJobSpec, RejectsZeroOrNegativeCpu) {
  ExpectRejected(With("cpu", 0), "cpu", {"> 0", "got 0"});
  ExpectRejected(With("cpu", -5), "cpu", {"> 0", "got -5"});
}

TEST(ParseJobSpec, RejectsZeroOrNegativeMemory) {
  ExpectRejected(With("memory", 0), "memory", {"> 0", "got 0"});
  ExpectRejected(With("memory", -64), "memory", {"> 0", "got -64"});
}

TEST(ParseJobSpec, RejectsNonIntegerNumbers) {
  ExpectRejected(With("cpu", 1.5), "cpu", {"integer", "1.5"});
  ExpectRejected(With("cpu", "100"), "cpu", {"integer", "\"100\""});
  ExpectRejected(With("memory", true), "memory", {"integer", "true"});
}

TEST(ParseJobSpec, RejectsNumbersBeyond32BitsShowingTheValueAsGiven) {
  ExpectRejected(With("cpu", 4294967297LL), "cpu", {"32 bits", "4294967297"});
  ExpectRejected(With("memory", -4294967297LL), "memory", {"32 bits", "-4294967297"});
  // Above the signed 64-bit range the value must not be shown wrapped (as -1).
  ExpectRejected(json::parse(R"({"command":["true"],"cpu":18446744073709551615})"), "cpu",
                 {"32 bits", "18446744073709551615"});
}

TEST(ParseJobSpec, RejectsMissingOrEmptyCommand) {
  ExpectRejected(json::parse(R"({"cpu":100})"), "command", {});
  ExpectRejected(With("command", json::array()), "command", {"empty"});
  ExpectRejected(With("command", "true"), "command", {"array"});
  ExpectRejected(With("command", {""}), "command", {"command[0]", "empty"});
}

TEST(ParseJobSpec, RejectsNonStringCommandElement) {
  ExpectRejected(With("command", {"echo", 5}), "command", {"strings", "got 5"});
}

TEST(ParseJobSpec, RejectsNulInCommandArgument) {
  ExpectRejected(With("command", {"echo", std::string("a\0b", 3)}), "command", {"NUL"});
}

TEST(ParseJobSpec, RejectsEnvThatIsNotAnObject) {
  ExpectRejected(With("env", "A=B"), "env", {"object", "\"A=B\""});
  ExpectRejected(With("env", {"A", "B"}), "env", {"object"});
}

TEST(ParseJobSpec, RejectsEnvWithNonStringValue) {
  ExpectRejected(With("env", {{"A", 1}}), "env", {"env.A", "1"});
  ExpectRejected(With("env", {{"A", nullptr}}), "env", {"env.A", "null"});
}

TEST(ParseJobSpec, RejectsEnvNamesThatAreEmptyOrContainEquals) {
  ExpectRejected(With("env", {{"", "x"}}), "env", {"non-empty"});
  ExpectRejected(With("env", {{"A=B", "x"}}), "env", {"A=B"});
}

TEST(ParseJobSpec, RejectsConstraintsThatAreNotAnObject) {
  ExpectRejected(With("constraints", json::array({"zone=a"})), "constraints", {"object", "zone=a"});
  ExpectRejected(With("constraints", {{"zone", 1}}), "constraints", {"constraints.zone", "1"});
}

TEST(ParseJobSpec, RejectsPriorityOutsideZeroToHundred) {
  ExpectRejected(With("priority", -1), "priority", {"between 0 and 100", "got -1"});
  ExpectRejected(With("priority", 101), "priority", {"between 0 and 100", "got 101"});
}

TEST(ParseJobSpec, RejectsZeroMaxAttempts) {
  ExpectRejected(With("max_attempts", 0), "max_attempts", {">= 1", "got 0"});
}

TEST(ParseJobSpec, RejectsUnknownNetwork) {
  ExpectRejected(With("network", "overlay"), "network", {"\"host\"", "\"none\"", "\"bridge\"", "overlay"});
}

TEST(ParseJobSpec, RejectsZeroPidsMax) {
  ExpectRejected(With("pids_max", 0), "pids_max", {"> 0", "got 0"});
}

TEST(ParseJobSpec, RejectsNegativeStopGrace) {
  ExpectRejected(With("stop_grace_seconds", -1), "stop_grace_seconds", {">= 0", "got -1"});
}

TEST(ParseJobSpec, RejectsEmptyFormationAndNonStringStrings) {
  ExpectRejected(With("formation", ""), "formation", {"empty"});
  ExpectRejected(With("rootfs", 7), "rootfs", {"string", "7"});
  ExpectRejected(With("user", json::array()), "user", {"string", "[]"});
}

TEST(ParseJobSpec, RejectsNonBooleanCpuHardLimit) {
  ExpectRejected(With("cpu_hard_limit", 1), "cpu_hard_limit", {"true or false", "got 1"});
}

TEST(ParseJobSpec, RejectsUnknownFieldByName) {
  ExpectRejected(With("cpus", 100), "cpus", {"unknown field"});
}

TEST(ParseJobSpec, RejectsNonObjectSpec) {
  ExpectRejected(json::array({"true"}), "spec", {"object"});
}

TEST(ParseJobSpec, LongValuesAreShortenedInMessages) {
  try {
    ParseJobSpec(With("env", std::string(500, 'x')));
    FAIL() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_LT(std::string(e.what()).size(), 150u) << e.what();
  }
}

TEST(ToJson, RoundTripsThroughParseJobSpec) {
  JobSpec s;
  s.command = {"/bin/sh", "-c", "echo hi"};
  s.env = {{"A", "1"}, {"B", ""}};
  s.cpu = 1500;
  s.memory = 2048;
  s.constraints = {{"zone", "b"}, {"disk", "ssd"}};
  s.priority = 99;
  s.max_attempts = 3;
  s.formation = "web";
  s.rootfs = "alpine";
  s.user = "nobody";
  s.network = "none";
  s.pids_max = 64;
  s.cpu_hard_limit = true;
  s.stop_grace_seconds = 30;

  const json j = ToJson(s);
  const JobSpec back = ParseJobSpec(j);
  EXPECT_EQ(back.command, s.command);
  EXPECT_EQ(back.env, s.env);
  EXPECT_EQ(back.cpu, s.cpu);
  EXPECT_EQ(back.memory, s.memory);
  EXPECT_EQ(back.constraints, s.constraints);
  EXPECT_EQ(back.priority, s.priority);
  EXPECT_EQ(back.max_attempts, s.max_attempts);
  EXPECT_EQ(back.formation, s.formation);
  EXPECT_EQ(back.rootfs, s.rootfs);
  EXPECT_EQ(back.user, s.user);
  EXPECT_EQ(back.network, s.network);
  EXPECT_EQ(back.pids_max, s.pids_max);
  EXPECT_EQ(back.cpu_hard_limit, s.cpu_hard_limit);
  EXPECT_EQ(back.stop_grace_seconds, s.stop_grace_seconds);
  EXPECT_EQ(ToJson(back), j);
  // And through text, as the spec travels over the hostd API.
  EXPECT_EQ(ToJson(ParseJobSpec(json::parse(j.dump()))), j);
}

TEST(ToJson, DefaultsRoundTrip) {
  const json j = ToJson(ParseJobSpec(json::parse(R"({"command":["true"]})")));
  EXPECT_EQ(ToJson(ParseJobSpec(j)), j);
}

TEST(ParseKeyValue, AcceptsKeyAndValue) {
  EXPECT_EQ(ParseKeyValue("env", "a=b"), std::make_pair(std::string("a"), std::string("b")));
}

TEST(ParseKeyValue, AcceptsEmptyValue) {
  EXPECT_EQ(ParseKeyValue("env", "a="), std::make_pair(std::string("a"), std::string("")));
}

TEST(ParseKeyValue, SplitsAtTheFirstEquals) {
  EXPECT_EQ(ParseKeyValue("env", "a=b=c"), std::make_pair(std::string("a"), std::string("b=c")));
}

TEST(ParseKeyValue, RejectsEmptyKey) {
  try {
    ParseKeyValue("constraint", "=b");
    FAIL() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), "constraint");
    EXPECT_NE(std::string(e.what()).find("\"=b\""), std::string::npos) << e.what();
  }
}

TEST(ParseKeyValue, RejectsMissingEquals) {
  try {
    ParseKeyValue("label", "ab");
    FAIL() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.field(), "label");
    EXPECT_NE(std::string(e.what()).find("KEY=VALUE"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"ab\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pgfleet::model

namespace pgfleet::model {
namespace {

TEST(JsonLimits, NestingDepthCountsBracketsOutsideStringsOnly) {
  EXPECT_EQ(JsonNestingDepth("1"), 0);
  EXPECT_EQ(JsonNestingDepth(R"({"a":[1,{"b":[]}]})"), 4);
  EXPECT_EQ(JsonNestingDepth(R"(["[[[[", "\"[[[", {}])"), 2);
  EXPECT_EQ(JsonNestingDepth(std::string(100000, '[')), 100000);
}

TEST(JsonLimits, ParseRefusesDeepNestingAndBadTextNamingWhat) {
  EXPECT_EQ(ParseBoundedJson(R"({"a":[1]})", "body")["a"][0], 1);
  std::string deep = std::string(33, '[') + std::string(33, ']');
  try {
    ParseBoundedJson(deep, "body");
    ADD_FAILURE() << "accepted 33 levels";
  } catch (const JsonError& e) {
    EXPECT_STREQ(e.what(), "body must not nest arrays and objects deeper than 32 levels");
  }
  EXPECT_NO_THROW(ParseBoundedJson(std::string(32, '[') + std::string(32, ']'), "body"));
  try {
    ParseBoundedJson("{not json", "spec");
    ADD_FAILURE() << "accepted bad JSON";
  } catch (const JsonError& e) {
    EXPECT_STREQ(e.what(), "spec must be valid JSON");
  }
}

TEST(JsonLimits, ShowNeverDumpsContainersAndCutsLongScalars) {
  EXPECT_EQ(ShowJson(nlohmann::json::array({1, 2})), "[1,2]");
  EXPECT_EQ(ShowJson(nlohmann::json::object({{"a", 1}})), "{\"a\":1}");
  EXPECT_EQ(ShowJson(nlohmann::json::array({1, nlohmann::json::array()})), "an array of 2 items");
  EXPECT_EQ(ShowJson(nlohmann::json::object({{"a", nlohmann::json::object()}})),
            "an object of 1 keys");
  EXPECT_EQ(ShowJson(nlohmann::json(std::vector<int>(9, 0))), "an array of 9 items");
  EXPECT_EQ(ShowJson(5), "5");
  std::string shown = ShowJson(std::string(1000, 'x'));
  EXPECT_LE(shown.size(), 60u);
  EXPECT_EQ(shown.substr(shown.size() - 3), "...");
}

TEST(PrivilegeProblem, NamesRootHostNetworkAndRootfsPathsAndNothingElse) {
  JobSpec s;
  s.network = "none";
  EXPECT_FALSE(PrivilegeProblem(s));
  // uid 0, or gid 0 (the root group: 1000:0) is root's.
  for (const char* user : {"root", "0", "000", "0:0", "root:wheel", "1000:0", "1000:000"}) {
    s.user = user;
    auto p = PrivilegeProblem(s);
    ASSERT_TRUE(p) << user;
    EXPECT_EQ("user", p->first);
    EXPECT_NE(std::string::npos, p->second.find("pgfleet_privileged")) << p->second;
  }
  for (const char* user : {"nobody", "1000", "10", "rooty", "1000:10", "65535:65535"}) {
    s.user = user;
    EXPECT_FALSE(PrivilegeProblem(s)) << user;
  }
  // An unprivileged job's ids are those of its user namespace (65536 of them).
  for (const char* user : {"65536", "1000:65536", "4294967296", "99999999999", "2147483647"}) {
    s.user = user;
    auto p = PrivilegeProblem(s);
    ASSERT_TRUE(p) << user;
    EXPECT_EQ("user", p->first);
    EXPECT_NE(std::string::npos, p->second.find("below 65536")) << p->second;
  }
  s.user.clear();
  s.seccomp = "unconfined";
  EXPECT_EQ("seccomp", PrivilegeProblem(s)->first);
  s.seccomp = "default";
  s.network = "host";
  EXPECT_EQ("network", PrivilegeProblem(s)->first);
  s.network = "none";
  for (const char* path : {"/", "/srv/x", "../x", "./x", ".", "a/b"}) {
    s.rootfs = path;
    ASSERT_TRUE(PrivilegeProblem(s)) << path;
    EXPECT_EQ("rootfs", PrivilegeProblem(s)->first);
  }
  for (const char* name : {"busybox", "alpine-3.19", "my_image.v2"}) {
    s.rootfs = name;
    EXPECT_FALSE(PrivilegeProblem(s)) << name;
  }
  // A privileged spec asks for the same features; the check is the caller's.
  s.privileged = true;
  s.user = "root";
  EXPECT_TRUE(PrivilegeProblem(s));
}

TEST(ParseJobSpec, PrivilegedIsABooleanDefaultingToFalse) {
  EXPECT_FALSE(ParseJobSpec(json{{"command", {"true"}}}).privileged);
  EXPECT_TRUE(ParseJobSpec(json{{"command", {"true"}}, {"privileged", true}}).privileged);
  try {
    ParseJobSpec(json{{"command", {"true"}}, {"privileged", "yes"}});
    ADD_FAILURE() << "accepted privileged: \"yes\"";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string::npos, std::string(e.what()).find("privileged must be true or false"))
        << e.what();
  }
}

}  // namespace
}  // namespace pgfleet::model
