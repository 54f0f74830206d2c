#include "core/model/report.h"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>

namespace pgfleet::model {

using nlohmann::json;

Report Report::Running(int64_t job, int attempt, int64_t pid) {
  Report r;
  r.job = job;
  r.attempt = attempt;
  r.kind = ReportKind::kRunning;
  r.pid = pid;
  return r;
}

Report Report::StartFailed(int64_t job, int attempt, std::string error) {
  Report r;
  r.job = job;
  r.attempt = attempt;
  r.kind = ReportKind::kStartFailed;
  r.error = std::move(error);
  return r;
}

Report Report::Lost(int64_t job, int attempt, std::string error) {
  Report r = StartFailed(job, attempt, std::move(error));
  r.kind = ReportKind::kLost;
  return r;
}

Report Report::HealthChanged(int64_t job, int attempt, Health health, std::string output) {
  Report r;
  r.job = job;
  r.attempt = attempt;
  r.kind = ReportKind::kHealth;
  r.health = health;
  r.output = std::move(output);
  return r;
}

json ToJson(const Report& r) {
  json j{{"job", r.job}, {"attempt", r.attempt}, {"kind", std::string(ToString(r.kind))}};
  // Every kind: a report of another database's attempt of the same id must
  // not apply here (a running report without it did, and the job was lost).
  if (!r.uid.empty()) j["uid"] = r.uid;
  switch (r.kind) {
    case ReportKind::kRunning:
      j["pid"] = r.pid;
      return j;
    case ReportKind::kHealth:
      j["health"] = std::string(ToString(r.health));
      j["output"] = r.output;
      return j;
    case ReportKind::kExited:
      j["exit_code"] = r.exit_code >= 0 ? json(r.exit_code) : json(nullptr);
      j["signal"] = r.signal > 0 ? json(r.signal) : json(nullptr);
      j["oom_killed"] = r.oom_killed;
      j["peak_memory_bytes"] = r.peak_memory_bytes;
      j["cpu_seconds"] = r.cpu_seconds;
      j["output_tail"] = r.output_tail;
      break;
    case ReportKind::kStartFailed:
    case ReportKind::kLost:
      break;
  }
  j["error"] = r.error.empty() ? json(nullptr) : json(r.error);
  return j;
}

namespace {

const json& Field(const json& j, const char* name, bool (json::*is)() const noexcept,
                  const char* rule) {
  auto it = j.find(name);
  if (it == j.end() || !((*it).*is)()) {
    throw std::invalid_argument(std::string("report ") + name + " must be " + rule);
  }
  return *it;
}

template <typename T>
T Optional(const json& j, const char* name, T fallback) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  auto wrong = [&](const std::string& rule) {
    return std::invalid_argument(std::string("report ") + name + " " + rule);
  };
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // Integers only, and only those T holds: a float or an out-of-range
    // number converted to T would be undefined or wrong (found by fuzzing).
    if (!it->is_number_integer()) throw wrong("must be an integer");
    if (it->is_number_unsigned()) {
      if (it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        throw wrong("is out of range");
    } else {
      int64_t v = it->get<int64_t>();
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
        throw wrong("is out of range");
    }
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw wrong("has the wrong type");
  }
}

}  // namespace

Report ReportFromJson(const json& j) {
  if (!j.is_object()) throw std::invalid_argument("report must be a JSON object");
  Report r;
  r.job = Field(j, "job", &json::is_number_integer, "an integer").get<int64_t>();
  r.attempt = Optional<int>(j, "attempt", 0);
  if (!j.contains("attempt") || j["attempt"].is_null())
    throw std::invalid_argument("report attempt must be an integer");
  const auto kind =
      ParseReportKind(Field(j, "kind", &json::is_string, "a string").get<std::string>());
  if (!kind)
    throw std::invalid_argument(
        "report kind must be running, exited, start_failed, lost or health");
  r.kind = *kind;
  if (r.kind == ReportKind::kHealth) {
    auto health = ParseHealth(Field(j, "health", &json::is_string, "a string").get<std::string>());
    if (!health || *health == Health::kUnknown)
      throw std::invalid_argument("report health must be healthy or unhealthy");
    r.health = *health;
    r.output = Optional<std::string>(j, "output", "");
  }
  r.pid = Optional<int64_t>(j, "pid", 0);
  r.exit_code = Optional<int>(j, "exit_code", -1);
  r.signal = Optional<int>(j, "signal", 0);
  r.oom_killed = Optional<bool>(j, "oom_killed", false);
  r.peak_memory_bytes = Optional<int64_t>(j, "peak_memory_bytes", 0);
  r.cpu_seconds = Optional<double>(j, "cpu_seconds", 0);
  r.output_tail = Optional<std::string>(j, "output_tail", "");
  r.error = Optional<std::string>(j, "error", "");
  r.uid = Optional<std::string>(j, "uid", "");
  return r;
}

}  // namespace pgfleet::model
