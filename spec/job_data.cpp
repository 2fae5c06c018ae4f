#include "spec/job_data.hpp"

#include "models/data/feature_cross.hpp"
#include "models/data/sequence_source.hpp"
#include "models/data/file_source.hpp"
#include "models/data/kafka_source.hpp"
#include "models/data/synthetic.hpp"
#include "runtime/error.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace satrap {

namespace {

caf::expected<cached_dataset> convert(const job_spec& spec, const char* split,
                                      const std::vector<std::string>& patterns) {
  dataset_convert_options o;
  auto files = expand_data_files(patterns, "");
  if (!files)
    return make_error(errc::invalid_config,
                      std::string("data.") + split + "_files: " + files.error());
  o.files = std::move(files.value());
  o.format = spec.data.format;
  o.on_error = spec.data.on_error;
  o.chunk_samples = spec.data.chunk_samples;
  o.workers = spec.placement.loaders;
  o.cache_root = job_data_cache_root(spec.data);
  o.cache_max_bytes = static_cast<uint64_t>(spec.data.cache_max_mib) << 20;
  auto built = dataset_cache_build(o);
  if (!built)
    return make_error(built.bad_input() ? errc::invalid_config : errc::io_failure,
                      "data: " + built.error());
  auto& r = built.value();
  if (r.trimmed > 0)
    spdlog::info("data_cache_trimmed removed={} cap_mib={} root={}", r.trimmed,
                 spec.data.cache_max_mib, o.cache_root);
  auto& st = r.stats;
  spdlog::info("data_cache_{} split={} files={} samples={} lines={} parse_seconds={:.2f} dir={}",
               r.reused ? "reused" : "built", split, o.files.size(), st.samples, st.lines,
               st.parse_seconds, r.dir);
  for (auto& [reason, count] : st.skipped)
    spdlog::warn("data_lines_skipped split={} reason={} count={}", split, reason, count);
  return r;
}

caf::expected<job_data> open_files(const job_spec& spec) {
  job_data out;
  auto train = convert(spec, "train", spec.data.train_files);
  if (!train)
    return train.error();
  cached_dataset test;
  if (!spec.data.test_files.empty()) {
    auto t = convert(spec, "test", spec.data.test_files);
    if (!t)
      return t.error();
    test = std::move(*t);
  }
  cached_dataset valid;
  if (!spec.data.validation_files.empty()) {
    auto v = convert(spec, "validation", spec.data.validation_files);
    if (!v)
      return v.error();
    valid = std::move(*v);
  }
  for (auto* r : {&*train, &test, &valid})
    for (auto& [reason, count] : r->stats.skipped)
      out.skipped[reason] += static_cast<int64_t>(count);
  auto opened = file_source::open(train->dir, test.dir, spec.data.reading, valid.dir);
  if (!opened)
    return make_error(errc::io_failure, "data: " + opened.error());
  auto& src = opened.value();
  auto& t = spec.training;
  const auto batch = static_cast<int64_t>(t.batch_size);
  const auto trainers = static_cast<int64_t>(spec.placement.trainers);
  out.train_batches = t.train_batches;
  if (out.train_batches == 0) {
    auto batches = (src->samples(data_split::train) * t.epochs + batch - 1) / batch;
    out.train_batches = (batches + trainers - 1) / trainers * trainers;
  }
  auto test_all = (src->samples(data_split::test) + batch - 1) / batch;
  out.test_batches = t.test_batches == 0 ? test_all : std::min(t.test_batches, test_all);
  auto valid_all = (src->samples(data_split::validation) + batch - 1) / batch;
  out.validation_batches =
    t.validation_batches == 0 ? valid_all : std::min(t.validation_batches, valid_all);
  out.epoch_steps = std::max<int64_t>(1, src->samples(data_split::train) / (batch * trainers));
  spdlog::info(
    "data_opened train_samples={} validation_samples={} test_samples={} train_batches={} "
    "validation_batches={} test_batches={}",
    src->samples(data_split::train), src->samples(data_split::validation),
    src->samples(data_split::test), out.train_batches, out.validation_batches, out.test_batches);
  out.source = std::move(src);
  return out;
}

}  // namespace

std::string job_data_cache_root(const data_spec& data) {
  if (!data.cache_dir.empty())
    return data.cache_dir;
  const char* tmp = std::getenv("TMPDIR");
  auto root = std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / "satrap-cache";
  return root.string();
}

namespace {

// A Kafka stream: training batches only (no test or validation split).
caf::expected<job_data> open_kafka(const job_spec& spec) {
  auto o = spec.data.kafka;
  o.timeout_ms = spec.timing.kafka_timeout_ms;
  o.lag_interval_ms = spec.timing.kafka_lag_interval_ms;
  o.skip_bad = spec.data.on_error == on_error_policy::skip;
  o.batch_size = spec.training.batch_size;
  if (!spec.checkpoint.dir.empty())
    o.positions_file =
      (std::filesystem::path(spec.checkpoint.dir) / "kafka-positions.json").string();
  auto opened = kafka_source::open(o, spec.data.format);
  if (!opened)
    return make_error(opened.bad_input() ? errc::invalid_config : errc::io_failure, opened.error());
  auto& src = opened.value();
  job_data out;
  const auto trainers = static_cast<int64_t>(spec.placement.trainers);
  out.train_batches = spec.training.train_batches;
  if (src->batches() < 0 && out.train_batches == 0)
    return make_error(errc::invalid_config,
                      "training.train_batches: expected the batches to train (> 0) for an "
                      "unbounded stream (data.kafka.end: none)");
  if (src->batches() >= 0) {  // end_offsets: train_batches 0 is the whole stream, in whole steps
    auto all = src->batches() / trainers * trainers;
    if (out.train_batches == 0 || out.train_batches > all)
      out.train_batches = all;
    if (out.train_batches < src->batches())
      spdlog::warn("kafka_batches_left batches={} trained={} trainers={}", src->batches(),
                   out.train_batches, trainers);
  }
  if (out.train_batches <= 0)
    return make_error(errc::invalid_config,
                      "data.kafka.end: the stream has no whole step of messages to train on ("
                        + std::to_string(src->samples(data_split::train)) + " messages)");
  const auto loaders = static_cast<size_t>(spec.placement.loaders);
  if (loaders > src->partitions().size())
    spdlog::warn(
      "kafka_loaders_share_partitions loaders={} partitions={} (loaders read disjoint "
      "offset ranges of a shared partition)",
      loaders, src->partitions().size());
  else if (src->partitions().size() % loaders != 0)
    spdlog::info("kafka_partitions_uneven loaders={} partitions={} (loaders rotate over them)",
                 loaders, src->partitions().size());
  src->set_batch_limit(out.train_batches);
  out.test_batches = 0;
  out.validation_batches = 0;
  out.epoch_steps = 0;
  out.source = std::move(src);
  return out;
}

caf::expected<job_data> open_source(const job_spec& spec) {
  if (spec.data.source == data_source::kafka)
    return open_kafka(spec);
  if (spec.data.source != data_source::synthetic)
    return open_files(spec);
  job_data out;
  out.source = std::make_shared<const synthetic_generator>(spec.data.synthetic);
  out.train_batches = spec.training.train_batches;
  out.test_batches = spec.training.test_batches;
  out.validation_batches = spec.training.validation_batches;
  out.epoch_steps = 0;  // an endless stream: no epochs
  return out;
}

}  // namespace

caf::expected<job_data> job_data_open(const job_spec& spec) {
  auto out = open_source(spec);
  if (!out)
    return out;
  if (!spec.data.crosses.empty()) {
    // The crosses are added to every batch as it is made: the cache holds the data's slots only.
    if (auto checked = check_crosses(spec.data.crosses, out->source->slots()); !checked)
      return make_error(errc::invalid_config, checked.error());
    out->source = std::make_shared<const crossed_source>(out->source, spec.data.crosses);
    spdlog::info("data_crosses crosses={} slots={}", spec.data.crosses.size(),
                 out->source->slots());
  }
  // Unpooled sequences become positions as each batch is made (after the crosses, which cannot
  // take them), like the crosses outside the cache.
  if (auto seq = job_data_sequences(spec.data); !seq.empty()) {
    out->source = std::make_shared<const sequence_source>(out->source, seq);
    spdlog::info("data_sequences sequences={} positions={} slots={} dense={}", seq.slots.size(),
                 seq.positions(), out->source->slots(), out->source->dense_features());
  }
  return out;
}

}  // namespace satrap
