#pragma once
// A replica's health check (jobs.health_check, the domain
// pgfleet.spec_health_check of migrations/0031_health_checks.sql, with the
// same rules) and the state machine hostd runs each attempt's checks
// through (hostd/health/). Pure: the caller gives every check's result and
// the time.
//
//   {"type":"command","command":["cat","/ready"]}   a command inside the job
//   {"type":"http","port":8080,"path":"/healthz"}   GET; 2xx and 3xx pass
//   {"type":"tcp","port":6379}                      a connect passes
// each with interval_seconds (default 10), timeout_seconds (2),
// failure_threshold (3) and grace_seconds (0).

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pgfleet::model {

inline constexpr int kDefaultHealthIntervalSeconds = 10;
inline constexpr int kDefaultHealthTimeoutSeconds = 2;
inline constexpr int kDefaultHealthFailureThreshold = 3;
inline constexpr int kDefaultHealthGraceSeconds = 0;
// Bounds, the domain's: a command of at most 64 arguments of 4096 bytes
// together, a path of at most 1024 bytes.
inline constexpr int kMaxHealthCommandArgs = 64;
inline constexpr int kMaxHealthCommandBytes = 4096;
inline constexpr int kMaxHealthPathBytes = 1024;
// What a health report and jobs.health_output carry of a check's output.
inline constexpr size_t kMaxHealthOutputBytes = 4096;

enum class HealthCheckType { kCommand, kHttp, kTcp };
std::string_view ToString(HealthCheckType t);

struct HealthCheck {
  HealthCheckType type = HealthCheckType::kCommand;
  std::vector<std::string> command;                        // kCommand: argv, never a shell
  int port = 0;                                            // kHttp, kTcp: 1..65535
  std::string path = "/";                                  // kHttp
  int interval_seconds = kDefaultHealthIntervalSeconds;    // 1..86400
  int timeout_seconds = kDefaultHealthTimeoutSeconds;      // 1..3600
  int failure_threshold = kDefaultHealthFailureThreshold;  // 1..100
  int grace_seconds = kDefaultHealthGraceSeconds;          // 0..86400
};

// Parses a health_check object (the spec's field; null is "no check",
// handled by the caller). Throws SpecError naming health_check.<field> and
// the rule; unknown fields are refused.
HealthCheck ParseHealthCheck(const nlohmann::json& j);
// Checks every rule; throws SpecError for the first one broken.
void Validate(const HealthCheck& c);
nlohmann::json ToJson(const HealthCheck& c);

// jobs.health.
enum class Health { kUnknown, kHealthy, kUnhealthy };
std::string_view ToString(Health h);
std::optional<Health> ParseHealth(std::string_view s);

// One attempt's checks: when the next is due, and what the results make of
// its health. Unknown until the first result; healthy after one success;
// unhealthy after failure_threshold failures in a row; no check during
// grace_seconds after the start. Not thread-safe (one owner).
class HealthTracker {
 public:
  using Clock = std::chrono::steady_clock;
  HealthTracker(HealthCheck check, Clock::time_point started);

  const HealthCheck& check() const { return check_; }
  Health health() const { return health_; }
  int consecutive_failures() const { return failures_; }
  // When the next check is due (in flight: when the one running started
  // plus an interval).
  Clock::time_point next_due() const { return next_; }
  // Whether a check should start at `now` (not while one is in flight).
  bool Due(Clock::time_point now) const;
  // A check started at `now`: none other is due until its result.
  void Started(Clock::time_point now);
  // What a check found. Returns true when it changed health (the caller
  // reports the new health, with this output).
  bool Result(bool passed, Clock::time_point now);
  // Whether the attempt is unhealthy past its threshold: hostd stops it.
  bool Failed() const { return health_ == Health::kUnhealthy; }

 private:
  HealthCheck check_;
  Clock::time_point next_;
  bool in_flight_ = false;
  int failures_ = 0;
  Health health_ = Health::kUnknown;
};

// "health check failed 3 times: <output>": why hostd stops an unhealthy attempt.
std::string HealthStopReason(int failures, std::string_view output);

}  // namespace pgfleet::model
