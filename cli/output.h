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

}  // namespace pgfleet::cli
