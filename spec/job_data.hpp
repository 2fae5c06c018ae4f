// The data of a job: opens the spec's batch_source (the synthetic generator, or file data
// converted into / reused from its binary cache) and sizes the plan from it.
// File lists are converted by `placement.loaders` threads (the files dealt among them); after
// that any loader serves any batch from the cache.
// Threading: job_data_open blocks while converting (once per data set); call it before the job's
// actors start. The source it returns is immutable and shared by the loaders.
#pragma once

#include "models/data/batch_source.hpp"
#include "models/data/dataset_cache.hpp"
#include "spec/job_spec.hpp"

#include <caf/expected.hpp>

#include <map>
#include <memory>
#include <string>

namespace satrap {

struct job_data {
  std::shared_ptr<const batch_source> source;  // what the loaders read
  int64_t train_batches = 0;                   // the spec's, or epochs x training samples / batch
  int64_t test_batches = 0;                    // the spec's (0: all), at most the whole test split
  int64_t validation_batches = 0;              // 0: no validation split
  int64_t epoch_steps = 0;                     // steps (per trainer) in one epoch; 0: endless data
  std::map<std::string, int64_t> skipped;      // lines skipped under on_error skip, by reason
};

caf::expected<job_data> job_data_open(const job_spec& spec);

// "" or the folder the converted data sets go to: data.cache_dir, else $TMPDIR/satrap-cache.
std::string job_data_cache_root(const data_spec& data);

}  // namespace satrap
