#pragma once
// When a job submitted by `pgfleet run` may start: --after (jobs that must
// succeed first, jobs.after), --at and --in (a delayed start, jobs.not_before;
// docs/dependencies.md), and whether a higher-priority job may stop it
// (--preemptible, jobs.preemptible; docs/preemption.md). Owns the flags'
// parsing and their rules: a bad value
// is a UsageError naming the flag and the rule, before anything is submitted.

#include <cstdint>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/queries.h"

namespace pgfleet::cli {

// --in's ceiling, and what --at may be at most ahead of now.
inline constexpr double kMaxStartDelaySeconds = 365 * 86400.0;

struct StartFlags {
  std::vector<std::string> after;  // each "ID[,ID...]" as given (repeatable)
  std::string at;                  // --at as given ("" when not)
  std::string in;                  // --in as given ("" when not)
  std::string preemptible;         // --preemptible as given ("" when not)
};

void AddStartOptions(Command& cmd, StartFlags* flags);

// The job ids of --after: positive integers, separated by commas.
std::vector<int64_t> ParseAfter(const std::vector<std::string>& values);
// --in: a positive duration (10s, 10m, 2h, 1d) of at most 365 days, in seconds.
double ParseStartIn(const std::string& value);
// Checks every flag; --at is read by the database (anything timestamptz
// parses, finite and at most 365 days ahead), on its own transaction of conn.
JobStart CheckStartFlags(const StartFlags& flags, pqxx::connection& conn);

}  // namespace pgfleet::cli
