#include "core/model/health_check.h"

#include <set>

#include "core/model/job_spec.h"
#include "core/model/json_limits.h"
#include "core/model/spec_fields.h"

namespace pgfleet::model {

using nlohmann::json;

std::string_view ToString(HealthCheckType t) {
  switch (t) {
    case HealthCheckType::kCommand:
      return "command";
    case HealthCheckType::kHttp:
      return "http";
    case HealthCheckType::kTcp:
      return "tcp";
  }
  return "?";
}

std::string_view ToString(Health h) {
  switch (h) {
    case Health::kUnknown:
      return "unknown";
    case Health::kHealthy:
      return "healthy";
    case Health::kUnhealthy:
      return "unhealthy";
  }
  return "?";
}

std::optional<Health> ParseHealth(std::string_view s) {
  for (Health h : {Health::kUnknown, Health::kHealthy, Health::kUnhealthy}) {
    if (ToString(h) == s) return h;
  }
  return std::nullopt;
}

namespace {

constexpr const char* kField = "health_check";

SpecError Broken(const std::string& field, const std::string& rule) {
  return SpecError(std::string(kField) + "." + field,
                   std::string(kField) + "." + field + " " + rule);
}

}  // namespace

HealthCheck ParseHealthCheck(const json& j) {
  if (!j.is_object()) {
    throw SpecError(kField, "health_check must be an object (got " + ShowJson(j) + ")");
  }
  static const std::set<std::string> known = {"type",
                                              "command",
                                              "port",
                                              "path",
                                              "interval_seconds",
                                              "timeout_seconds",
                                              "failure_threshold",
                                              "grace_seconds"};
  for (auto& [k, v] : j.items()) {
    if (!known.count(k)) throw SpecError(kField, "health_check has an unknown field " + k);
  }
  HealthCheck c;
  const std::string type = StringField(j, "type", "", "health_check.type");
  if (type == "command") {
    c.type = HealthCheckType::kCommand;
  } else if (type == "http") {
    c.type = HealthCheckType::kHttp;
  } else if (type == "tcp") {
    c.type = HealthCheckType::kTcp;
  } else {
    throw Broken("type", "must be command, http or tcp (got \"" + type.substr(0, 64) + "\")");
  }
  if (auto cmd = j.find("command"); cmd != j.end()) {
    if (!cmd->is_array()) throw Broken("command", "must be an array of strings");
    if (cmd->size() > static_cast<size_t>(kMaxHealthCommandArgs)) {
      throw Broken("command", "must have at most " + std::to_string(kMaxHealthCommandArgs) +
                                  " arguments (got " + std::to_string(cmd->size()) + ")");
    }
    for (auto& a : *cmd) {
      if (!a.is_string()) throw Broken("command", "must be an array of strings");
      c.command.push_back(a.get<std::string>());
    }
  } else if (c.type == HealthCheckType::kCommand) {
    throw Broken("command", "must be given for type command");
  }
  if (j.contains("command") && c.type != HealthCheckType::kCommand) {
    throw Broken("command", "is for type command only");
  }
  c.port = IntField(j, "port", 0, "health_check.port");
  if (j.contains("port") && c.type == HealthCheckType::kCommand) {
    throw Broken("port", "is for type http or tcp only");
  }
  if (j.contains("path") && c.type != HealthCheckType::kHttp) {
    throw Broken("path", "is for type http only");
  }
  c.path = StringField(j, "path", "/", "health_check.path");
  c.interval_seconds = IntField(j, "interval_seconds", kDefaultHealthIntervalSeconds,
                                "health_check.interval_seconds");
  c.timeout_seconds =
      IntField(j, "timeout_seconds", kDefaultHealthTimeoutSeconds, "health_check.timeout_seconds");
  c.failure_threshold = IntField(j, "failure_threshold", kDefaultHealthFailureThreshold,
                                 "health_check.failure_threshold");
  c.grace_seconds =
      IntField(j, "grace_seconds", kDefaultHealthGraceSeconds, "health_check.grace_seconds");
  Validate(c);
  return c;
}

void Validate(const HealthCheck& c) {
  auto got = [](int v) { return " (got " + std::to_string(v) + ")"; };
  if (c.type == HealthCheckType::kCommand) {
    if (c.command.empty() || c.command[0].empty()) {
      throw Broken("command", "must be a non-empty array whose first string is not empty");
    }
    if (c.command.size() > static_cast<size_t>(kMaxHealthCommandArgs)) {
      throw Broken("command", "must have at most " + std::to_string(kMaxHealthCommandArgs) +
                                  " arguments (got " + std::to_string(c.command.size()) + ")");
    }
    size_t bytes = 0;
    for (const auto& a : c.command) {
      if (a.find('\0') != std::string::npos) throw Broken("command", "must not contain NUL bytes");
      bytes += a.size();
    }
    if (bytes > static_cast<size_t>(kMaxHealthCommandBytes)) {
      throw Broken("command", "must be at most " + std::to_string(kMaxHealthCommandBytes) +
                                  " bytes (got " + std::to_string(bytes) + ")");
    }
  } else if (c.port < 1 || c.port > 65535) {
    throw Broken("port", "must be between 1 and 65535" + got(c.port));
  }
  if (c.type == HealthCheckType::kHttp) {
    bool printable = !c.path.empty() && c.path[0] == '/' &&
                     c.path.size() <= static_cast<size_t>(kMaxHealthPathBytes);
    for (char ch : c.path) printable = printable && ch > ' ' && ch <= '~';
    if (!printable) {
      throw Broken("path", "must start with / and be at most " +
                               std::to_string(kMaxHealthPathBytes) +
                               " printable ASCII bytes without spaces");
    }
  }
  auto between = [&](const char* field, int v, int lo, int hi) {
    if (v < lo || v > hi) {
      throw Broken(field,
                   "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + got(v));
    }
  };
  between("interval_seconds", c.interval_seconds, 1, 86400);
  between("timeout_seconds", c.timeout_seconds, 1, 3600);
  between("failure_threshold", c.failure_threshold, 1, 100);
  between("grace_seconds", c.grace_seconds, 0, 86400);
}

json ToJson(const HealthCheck& c) {
  json j{{"type", std::string(ToString(c.type))},
         {"interval_seconds", c.interval_seconds},
         {"timeout_seconds", c.timeout_seconds},
         {"failure_threshold", c.failure_threshold},
         {"grace_seconds", c.grace_seconds}};
  if (c.type == HealthCheckType::kCommand) j["command"] = c.command;
  if (c.type != HealthCheckType::kCommand) j["port"] = c.port;
  if (c.type == HealthCheckType::kHttp) j["path"] = c.path;
  return j;
}

HealthTracker::HealthTracker(HealthCheck check, Clock::time_point started)
    : check_(std::move(check)), next_(started + std::chrono::seconds(check_.grace_seconds)) {}

bool HealthTracker::Due(Clock::time_point now) const { return !in_flight_ && now >= next_; }

void HealthTracker::Started(Clock::time_point now) {
  in_flight_ = true;
  next_ = now + std::chrono::seconds(check_.interval_seconds);
}

bool HealthTracker::Result(bool passed, Clock::time_point now) {
  in_flight_ = false;
  // The next check is an interval after this one started, but never sooner
  // than now: a check that took longer than its interval is not run back to back.
  if (next_ < now) next_ = now;
  const Health before = health_;
  if (passed) {
    failures_ = 0;
    health_ = Health::kHealthy;
  } else if (++failures_ >= check_.failure_threshold) {
    health_ = Health::kUnhealthy;
  }
  return health_ != before;
}

std::string HealthStopReason(int failures, std::string_view output) {
  std::string reason =
      "health check failed " + std::to_string(failures) + (failures == 1 ? " time" : " times");
  if (!output.empty()) reason += ": " + std::string(output);
  return reason;
}

}  // namespace pgfleet::model
