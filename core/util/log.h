#pragma once
#include <string>

namespace pgfleet::util {
// Configures spdlog for a daemon or the CLI: "<time> <level> <who>: message" on
// stderr, at the given level (trace, debug, info, warn, error). Throws
// std::invalid_argument naming --log-level for an unknown level.
void SetupLogging(const std::string& who, const std::string& level);
}  // namespace pgfleet::util
