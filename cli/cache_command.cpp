#include "cli/cache_command.hpp"

#include "cli/exit_status.hpp"
#include "models/data/dataset_cache.hpp"
#include "models/data/dataset_cache_entries.hpp"
#include "runtime/error.hpp"
#include "spec/job_data.hpp"

#include <cstdio>
#include <iostream>

namespace satrap {

namespace {

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::string age(int64_t s) {
  if (s < 120)
    return std::to_string(s) + " s";
  if (s < 7200)
    return std::to_string(s / 60) + " min";
  if (s < 172800)
    return std::to_string(s / 3600) + " h";
  return std::to_string(s / 86400) + " d";
}

}  // namespace

void cache_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand("cache",
                            "List or delete the converted data sets of the data cache "
                            "(data.cache_dir)");
  sub_->require_subcommand(1);
  auto dir_help = "the cache folder (default: data.cache_dir's default, $TMPDIR/satrap-cache)";
  list_ = sub_->add_subcommand("list",
                               "List satrap's data sets in the cache folder: size, files, "
                               "last use, and whether a job holds one now");
  list_->add_option("--cache-dir", cache_dir_, dir_help);
  clean_ = sub_->add_subcommand("clean",
                                "Delete satrap's data sets from the cache folder, except "
                                "those a running job holds; nothing else in the folder");
  clean_->add_option("--cache-dir", cache_dir_, dir_help);
  clean_->add_flag("--dry-run", dry_run_, "only say what would be deleted");
}

int cache_command::run() {
  if (cache_dir_.empty())
    cache_dir_ = job_data_cache_root(data_spec{});
  return list_->parsed() ? list() : clean();
}

int cache_command::list() const {
  auto listed = dataset_cache_list(cache_dir_);
  if (!listed) {
    std::cerr << "satrap cache list: " << printable(listed.error()) << "\n";
    return listed.bad_input() ? exit_bad_input : exit_failed;
  }
  auto& l = listed.value();
  uint64_t total = 0;
  for (auto& e : l.entries) {
    total += e.bytes;
    std::printf("%s  %10s  %-9s  used %s ago  %s\n", e.dir.c_str(), mib(e.bytes).c_str(),
                e.in_use ? "in use" : (e.complete ? "idle" : "unfinished"), age(e.idle_s).c_str(),
                e.complete
                  ? (printable(e.files) + ", " + std::to_string(e.samples) + " samples").c_str()
                  : "(a conversion, running or abandoned)");
  }
  std::printf("%zu data sets, %s in %s", l.entries.size(), mib(total).c_str(), cache_dir_.c_str());
  if (l.foreign > 0)
    std::printf(" (and %d other entries, not satrap's)", l.foreign);
  std::printf("\n");
  return exit_done;
}

int cache_command::clean() const {
  auto listed = dataset_cache_list(cache_dir_);
  if (!listed) {
    std::cerr << "satrap cache clean: " << printable(listed.error()) << "\n";
    return listed.bad_input() ? exit_bad_input : exit_failed;
  }
  auto& l = listed.value();
  int removed = 0, kept = 0, failed = 0;
  uint64_t freed = 0;
  for (auto& e : l.entries) {
    if (dry_run_) {
      bool held = dataset_cache_in_use(e.dir);
      std::printf("%s %s (%s)\n", held ? "would keep (in use)" : "would delete", e.dir.c_str(),
                  mib(e.bytes).c_str());
      held ? ++kept : (++removed, freed += e.bytes);
      continue;
    }
    auto removed_one = dataset_cache_remove(e.dir);
    if (!removed_one) {
      std::cerr << "satrap cache clean: " << printable(removed_one.error()) << "\n";
      ++failed;
      continue;
    }
    switch (removed_one.value()) {
      case cache_lock::outcome::held:
        std::printf("deleted %s (%s)\n", e.dir.c_str(), mib(e.bytes).c_str());
        ++removed;
        freed += e.bytes;
        break;
      case cache_lock::outcome::busy:
        std::printf("kept %s: a job is using it\n", e.dir.c_str());
        ++kept;
        break;
      case cache_lock::outcome::gone: break;
    }
  }
  std::printf("%s %d data sets (%s), kept %d in use, in %s\n",
              dry_run_ ? "would delete" : "deleted", removed, mib(freed).c_str(), kept,
              cache_dir_.c_str());
  return failed > 0 ? exit_failed : exit_done;
}

}  // namespace satrap
