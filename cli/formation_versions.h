#pragma once
// `pgfleet formation update | history | revert | promote | status`: a
// formation's versions and rollouts (cli/formation_versions.cpp), and the
// rollout flags `formation create` shares with `update`.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"

namespace pgfleet::cli {

// --max-parallel, --min-healthy-time, --canary, --progress-deadline,
// --auto-revert: the formation's rollout settings (checked by the database).
struct RolloutFlags {
  std::string max_parallel, min_healthy_time, progress_deadline, auto_revert;
  int canary = 0;
};
void AddRolloutOptions(Command& cmd, RolloutFlags* flags);
// The formations columns the given rollout flags set, as an object (empty
// when none was given). Throws UsageError for a value the CLI can judge.
nlohmann::json RolloutChanges(const Command& cmd, const RolloutFlags& flags);

// --max-running N (1-100000; `none` on update: unlimited): how many of the
// formation's jobs may be assigned or running at once (docs/limits.md).
struct LimitFlags {
  std::string max_running;
  std::string preemptible;    // true, false or default
  std::string min_available;  // 0-100000 or none
};
void AddLimitOptions(Command& cmd, LimitFlags* flags);
// Adds the formations columns the given limit flags set to *changes. Throws
// UsageError for a value that is not a whole number in range (or none).
void AddLimitChanges(const Command& cmd, const LimitFlags& flags, nlohmann::json* changes);

// True for the subcommands CmdFormationVersions runs.
bool IsVersionSubcommand(const std::string& sub);
// Runs one: `args` are the words after it, `command` those after "--".
int CmdFormationVersions(const std::string& sub, const std::vector<std::string>& args,
                         const std::vector<std::string>& command);

}  // namespace pgfleet::cli
