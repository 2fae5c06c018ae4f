#include "runtime/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>

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

bool log_rate::allow(uint64_t& unlogged) {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::steady_clock::now().time_since_epoch())
               .count();
  auto second = second_.load(std::memory_order_relaxed);
  if (second != now && second_.compare_exchange_strong(second, now))
    lines_ = 0;
  if (++lines_ > per_second_) {
    ++unlogged_;
    return false;
  }
  unlogged = unlogged_.exchange(0);
  return true;
}

}  // namespace satrap
