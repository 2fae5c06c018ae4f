// `satrap cache list|clean`: the data cache folder (`data.cache_dir`, by default
// $TMPDIR/satrap-cache) that `satrap train` and the loaders convert text data sets into
// (models/data/dataset_cache.hpp). `list` shows satrap's data sets in it; `clean` deletes them,
// except one a job holds now (its lock, models/data/cache_lock.hpp), and nothing that is not
// satrap's. Exit statuses (cli/exit_status.hpp): 0 done (a held data set kept is not a failure),
// 1 a deletion failed, 2 bad input (a cache folder that is not a folder).
// Threading: runs on the calling thread.
#pragma once

#include "cli/command.hpp"

#include <string>

namespace satrap {

class cache_command : public command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  int list() const;
  int clean() const;

  CLI::App* list_ = nullptr;
  CLI::App* clean_ = nullptr;
  std::string cache_dir_;  // "" until parsed: then the default root
  bool dry_run_ = false;
};

}  // namespace satrap
