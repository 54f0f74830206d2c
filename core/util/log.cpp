#include "core/util/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

namespace pgfleet::util {

void SetupLogging(const std::string& who, const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    throw std::invalid_argument(
        "--log-level must be trace, debug, info, warn, error or off (got \"" + level + "\")");
  }
  auto logger = spdlog::stderr_logger_mt(who);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %n: %v");
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace pgfleet::util
