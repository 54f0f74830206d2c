#pragma once
// Every state name pgfleet writes or reads, as enums. The strings appear only
// here (and in the database's CHECK constraints and functions): C++ code
// compares enums, and converts at the edges with ToString / Parse*.
//
// Parse* return std::nullopt for a name they do not know; callers that read
// the database treat that as a bug to log, never as a state to guess.

#include <optional>
#include <string_view>

namespace pgfleet::model {

// pgfleet.jobs.state.
enum class JobState { kPending, kAssigned, kRunning, kSucceeded, kFailed, kCancelled };
std::string_view ToString(JobState s);
std::optional<JobState> ParseJobState(std::string_view s);
// succeeded, failed or cancelled: the row will not change state again.
bool IsFinal(JobState s);

// A replica of a service formation, as the reconciler sees it (the live job
// states: a finished replica is no longer a replica).
enum class ReplicaState { kPending, kAssigned, kRunning };
std::string_view ToString(ReplicaState s);
std::optional<ReplicaState> ParseReplicaState(std::string_view s);

// One attempt as hostd's supervisor tracks it.
enum class AttemptState { kStarting, kRunning, kStopping, kExited, kStartFailed, kLost };
std::string_view ToString(AttemptState s);
std::optional<AttemptState> ParseAttemptState(std::string_view s);
// starting, running or stopping: a shim (and perhaps the job) may still live.
bool IsLive(AttemptState s);

// How an attempt ended (hostd's outcome record and its report).
enum class ExitOutcome { kExited, kStartFailed, kLost };
std::string_view ToString(ExitOutcome o);
std::optional<ExitOutcome> ParseExitOutcome(std::string_view s);
// The supervisor state an attempt takes on once it has this outcome.
AttemptState StateAfter(ExitOutcome o);

// What one report from a host says happened to an attempt.
enum class ReportKind { kRunning, kExited, kStartFailed, kLost, kHealth };
std::string_view ToString(ReportKind k);
std::optional<ReportKind> ParseReportKind(std::string_view s);
ReportKind ReportKindOf(ExitOutcome o);

}  // namespace pgfleet::model
