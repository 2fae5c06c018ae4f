#include "runtime/log.hpp"

#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace satrap {

namespace {

void install(std::shared_ptr<spdlog::logger> logger, spdlog::level::level_enum lvl) {
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  logger->set_level(lvl);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace

bool log_setup(const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    return false;
  spdlog::drop("satrap");
  install(spdlog::stderr_color_mt("satrap"), lvl);
  return true;
}

std::string log_setup(const std::string& level, const std::string& file,
                      const log_rotation& rotation) {
  if (file.empty())
    return log_setup(level) ? "" : "unknown log level '" + level + "'";
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    return "unknown log level '" + level + "'";
  if (rotation.max_bytes < 4096 || rotation.files < 1)
    return "a log file rotates at 4 KiB at least, and keeps 1 file at least";
  spdlog::file_event_handlers handlers;
  // Each file spdlog opens (the first, and each after a rotation) becomes stdout and stderr too.
  handlers.after_open = [](const spdlog::filename_t&, std::FILE* f) {
    std::fflush(stdout);
    std::fflush(stderr);
    ::dup2(::fileno(f), STDOUT_FILENO);
    ::dup2(::fileno(f), STDERR_FILENO);
  };
  try {
    auto sink = std::make_shared<spdlog::sinks::rotating_file_sink_mt>(
      file, rotation.max_bytes, rotation.files - 1, false, handlers);
    spdlog::drop("satrap");
    auto logger = std::make_shared<spdlog::logger>("satrap", std::move(sink));
    logger->flush_on(spdlog::level::trace);  // each line at once, as on stderr
    spdlog::register_logger(logger);
    install(std::move(logger), lvl);
  } catch (const spdlog::spdlog_ex& e) {
    return file + ": " + e.what();
  }
  return "";
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
