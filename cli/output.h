#pragma once
// How CLI commands print results on stdout: aligned tables for people, JSON
// (--json) for programs. Both flush nothing; callers that stream flush.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pgfleet::cli {

// Prints a header row and the rows, each column padded to its widest cell
// plus two spaces (the last column is not padded).
void PrintTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows);

// Prints j indented by two spaces, invalid UTF-8 replaced by U+FFFD.
void PrintJson(const nlohmann::json& j);

// s with every control character a terminal would act on (C0 but newline
// and tab when keep_lines, DEL, and C1 as UTF-8) shown as \xNN, so a value a
// job or a submitter wrote (a command, an error, output) cannot move the
// operator's cursor, retitle the window or rewrite the screen. Tables and
// job documents print through it; `pgfleet logs` keeps the job's bytes.
// With raw output on (--raw, to a pipe or file only), s unchanged.
std::string Printable(const std::string& s, bool keep_lines = false);
void SetRawOutput(bool raw);

// A formation_status row's "healthy/unhealthy" live replicas, "-" for a
// formation without a health check.
std::string HealthCounts(const nlohmann::json& formation_status);

}  // namespace pgfleet::cli
