#include "core/model/states.h"

#include <array>
#include <utility>

namespace pgfleet::model {
namespace {

// One table per enum: the enum's values in declaration order, with their names.
template <typename E, size_t N>
using Names = std::array<std::pair<E, std::string_view>, N>;

constexpr Names<JobState, 6> kJobStates{{{JobState::kPending, "pending"},
                                         {JobState::kAssigned, "assigned"},
                                         {JobState::kRunning, "running"},
                                         {JobState::kSucceeded, "succeeded"},
                                         {JobState::kFailed, "failed"},
                                         {JobState::kCancelled, "cancelled"}}};
constexpr Names<ReplicaState, 3> kReplicaStates{{{ReplicaState::kPending, "pending"},
                                                 {ReplicaState::kAssigned, "assigned"},
                                                 {ReplicaState::kRunning, "running"}}};
constexpr Names<AttemptState, 6> kAttemptStates{{{AttemptState::kStarting, "starting"},
                                                 {AttemptState::kRunning, "running"},
                                                 {AttemptState::kStopping, "stopping"},
                                                 {AttemptState::kExited, "exited"},
                                                 {AttemptState::kStartFailed, "start_failed"},
                                                 {AttemptState::kLost, "lost"}}};
constexpr Names<ExitOutcome, 3> kOutcomes{{{ExitOutcome::kExited, "exited"},
                                           {ExitOutcome::kStartFailed, "start_failed"},
                                           {ExitOutcome::kLost, "lost"}}};
constexpr Names<ReportKind, 5> kReportKinds{{{ReportKind::kRunning, "running"},
                                             {ReportKind::kExited, "exited"},
                                             {ReportKind::kStartFailed, "start_failed"},
                                             {ReportKind::kLost, "lost"},
                                             {ReportKind::kHealth, "health"}}};

template <typename E, size_t N>
std::string_view NameOf(const Names<E, N>& names, E value) {
  for (const auto& [e, name] : names) {
    if (e == value) return name;
  }
  return "?";
}

template <typename E, size_t N>
std::optional<E> ValueOf(const Names<E, N>& names, std::string_view name) {
  for (const auto& [e, n] : names) {
    if (n == name) return e;
  }
  return std::nullopt;
}

}  // namespace

std::string_view ToString(JobState s) { return NameOf(kJobStates, s); }
std::optional<JobState> ParseJobState(std::string_view s) { return ValueOf(kJobStates, s); }
bool IsFinal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

std::string_view ToString(ReplicaState s) { return NameOf(kReplicaStates, s); }
std::optional<ReplicaState> ParseReplicaState(std::string_view s) {
  return ValueOf(kReplicaStates, s);
}

std::string_view ToString(AttemptState s) { return NameOf(kAttemptStates, s); }
std::optional<AttemptState> ParseAttemptState(std::string_view s) {
  return ValueOf(kAttemptStates, s);
}
bool IsLive(AttemptState s) {
  return s == AttemptState::kStarting || s == AttemptState::kRunning ||
         s == AttemptState::kStopping;
}

std::string_view ToString(ExitOutcome o) { return NameOf(kOutcomes, o); }
std::optional<ExitOutcome> ParseExitOutcome(std::string_view s) { return ValueOf(kOutcomes, s); }
AttemptState StateAfter(ExitOutcome o) {
  switch (o) {
    case ExitOutcome::kExited:
      return AttemptState::kExited;
    case ExitOutcome::kStartFailed:
      return AttemptState::kStartFailed;
    case ExitOutcome::kLost:
      return AttemptState::kLost;
  }
  return AttemptState::kLost;
}

std::string_view ToString(ReportKind k) { return NameOf(kReportKinds, k); }
std::optional<ReportKind> ParseReportKind(std::string_view s) { return ValueOf(kReportKinds, s); }
ReportKind ReportKindOf(ExitOutcome o) {
  switch (o) {
    case ExitOutcome::kExited:
      return ReportKind::kExited;
    case ExitOutcome::kStartFailed:
      return ReportKind::kStartFailed;
    case ExitOutcome::kLost:
      return ReportKind::kLost;
  }
  return ReportKind::kLost;
}

}  // namespace pgfleet::model
