#pragma once
// One table of job specs and what must be said about each, run against both
// places that judge a spec: hostd's validator (tests/unit/spec_cases_test.cpp,
// model::ParseJobSpec) and the database at insert (tests/integration/
// spec_cases_test.cpp, pgfleet.jobs). A rule added to one and not the other
// fails one of the two tests, so the database never accepts a job hostd would
// refuse (which used to stall every dispatch batch it was part of).

#include <string>
#include <vector>

namespace pgfleet::testing {

struct SpecCase {
  std::string name;
  std::string spec;     // JSON, as hostd receives it (fields not given take their defaults)
  std::string message;  // a part of the error both must give; empty = accepted
};

inline std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

inline std::vector<SpecCase> SpecCases() {
  const std::string big_value = std::string(70000, 'v');
  std::string many_args = R"(["true")";
  for (int i = 0; i < 1000; ++i) many_args += R"(,"x")";
  many_args += "]";
  return {
      {"accepted", R"({"command":["sh","-c","exit 0"],"env":{"A":"b"},"cpu":100})", ""},
      {"env name with =", R"({"command":["true"],"env":{"=x":"y"}})",
       "env names must be non-empty and contain no '='"},
      {"env name empty", R"({"command":["true"],"env":{"":"y"}})",
       "env names must be non-empty and contain no '='"},
      {"env name a=b", R"({"command":["true"],"env":{"A=B":"y"}})",
       "env names must be non-empty and contain no '='"},
      {"env too big", R"({"command":["true"],"env":{"BIG":")" + big_value + R"("}})",
       "env must be at most 65536 bytes"},
      {"env at the limit",
       R"({"command":["true"],"env":{"BIG":")" + std::string(65533, 'v') + R"("}})", ""},
      {"too many arguments", R"({"command":)" + many_args + "}",
       "command must have at most 1000 arguments"},
      {"command too big", R"({"command":["echo",")" + std::string(140000, 'a') + R"("]})",
       "command must be at most 131072 bytes"},
      {"constraints too big",
       R"({"command":["true"],"constraints":{"zone":")" + std::string(17000, 'z') + R"("}})",
       "constraints must be at most 16384 bytes"},
      {"rootfs too long", R"({"command":["true"],"rootfs":")" + Repeat("/d", 2100) + R"("})",
       "rootfs must be at most 4096 bytes"},
      {"user too long", R"({"command":["true"],"user":")" + std::string(5000, 'u') + R"("})",
       "user must be at most 4096 bytes"},
      {"user a name", R"({"command":["true"],"user":"nobody"})", ""},
      {"user uid:gid", R"({"command":["true"],"user":"1000:1000"})", ""},
      {"user with a space", R"({"command":["true"],"user":"a b"})",
       "user must be a name (a letter or _, then at most 31 of A-Z a-z 0-9 . _ -) or uid[:gid] "
       "in decimal (got \"a b\")"},
      {"user name then gid", R"({"command":["true"],"user":"nobody:0"})", "user must be a name"},
      {"user gid only", R"({"command":["true"],"user":":0"})", "user must be a name"},
      {"user uid 2^32 wraps to root", R"({"command":["true"],"user":"4294967296"})",
       "user ids must be at most 2147483647 (got \"4294967296\")"},
      {"user gid past the range", R"({"command":["true"],"user":"1000:2147483648"})",
       "user ids must be at most 2147483647"},
      {"cpu", R"({"command":["true"],"cpu":-1})", "cpu must be > 0"},
      {"memory", R"({"command":["true"],"memory":0})", "memory must be > 0"},
      {"priority", R"({"command":["true"],"priority":101})", "priority must be between 0 and 100"},
      {"max_attempts", R"({"command":["true"],"max_attempts":0})", "max_attempts must be >= 1"},
      {"network", R"({"command":["true"],"network":"overlay"})", "network must be "},
      {"network bridge", R"({"command":["true"],"network":"bridge"})", ""},
      {"ports", R"({"command":["true"],"ports":{"http":0,"metrics":29100}})", ""},
      {"ports null", R"({"command":["true"],"ports":null})", ""},
      {"ports not an object", R"({"command":["true"],"ports":[80]})", "ports must be an object"},
      {"ports name upper case", R"({"command":["true"],"ports":{"HTTP":0}})",
       "ports names must match ^[a-z][a-z0-9_]{0,31}$"},
      {"ports name with a dash", R"({"command":["true"],"ports":{"my-port":0}})",
       "ports names must match ^[a-z][a-z0-9_]{0,31}$"},
      {"ports name too long", R"({"command":["true"],"ports":{")" + Repeat("a", 33) + R"(":0}})",
       "ports names must match ^[a-z][a-z0-9_]{0,31}$"},
      {"port negative", R"({"command":["true"],"ports":{"http":-1}})", "from 0 to 65535"},
      {"port past 65535", R"({"command":["true"],"ports":{"http":65536}})", "from 0 to 65535"},
      {"port wraps past 2^32", R"({"command":["true"],"ports":{"http":4294967376}})",
       "from 0 to 65535"},
      {"port a fraction", R"({"command":["true"],"ports":{"http":80.5}})", "from 0 to 65535"},
      {"port a string", R"({"command":["true"],"ports":{"http":"80"}})", "from 0 to 65535"},
      {"port twice", R"({"command":["true"],"ports":{"a":29000,"b":29000}})",
       "must not name one port number twice"},
      {"port 0 twice is two ports", R"({"command":["true"],"ports":{"a":0,"b":0}})", ""},
      {"too many ports", R"({"command":["true"],"ports":{)" + [] {
         std::string s;
         for (int i = 0; i < 33; ++i) s += (i ? ",\"p" : "\"p") + std::to_string(i) + "\":0";
         return s;
       }() + "}}",
       "at most 32 names"},
      {"pids_max", R"({"command":["true"],"pids_max":0})", "pids_max must be > 0"},
      {"stop_grace_seconds", R"({"command":["true"],"stop_grace_seconds":-1})",
       "stop_grace_seconds must be >= 0"},
      {"log_max_files", R"({"command":["true"],"log_max_files":1})",
       "log_max_files must be between 2 and 100"},
      {"log_max_file_mb", R"({"command":["true"],"log_max_file_mb":1025})",
       "log_max_file_mb must be between 1 and 1024"},
      {"log limits", R"({"command":["true"],"log_max_files":100,"log_max_file_mb":1})", ""},
      {"disk negative", R"({"command":["true"],"disk":-1})", "disk must be between 0 and 16777216"},
      {"disk past 16 TiB", R"({"command":["true"],"disk":16777217})",
       "disk must be between 0 and 16777216"},
      {"disk", R"({"command":["true"],"disk":64})", ""},
      {"seccomp", R"({"command":["true"],"seccomp":"off"})",
       "seccomp must be 'default' or 'unconfined'"},
      {"empty command", R"({"command":[]})", "command must"},
      {"empty program", R"({"command":[""]})", "command"},
  };
}

}  // namespace pgfleet::testing
