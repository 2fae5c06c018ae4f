#include "runtime/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace satrap {

bool log_setup(const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    return false;
  auto logger = spdlog::stderr_color_mt("satrap");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
  return true;
}

}  // namespace satrap
