// The data.* keys of the job spec: where batches come from (synthetic or files, their format,
// splits, shuffle and binary cache). Their rows in the key table, the checks of the keys taken
// together, and what the data gives the network (slots, dense features). (See
// job_spec_fields.hpp for how the job spec's files are laid out.)
#include "spec/job_spec_fields.hpp"

#include <algorithm>

#include <yaml-cpp/yaml.h>

namespace satrap {

const char* data_source_name(data_source s) {
  switch (s) {
    case data_source::synthetic: return "synthetic";
    case data_source::criteo: return "criteo";
    case data_source::libsvm: return "libsvm";
    case data_source::libfm: return "libfm";
    case data_source::libffm: return "libffm";
    case data_source::jsonl: return "jsonl";
    case data_source::tfrecord: return "tfrecord";
    case data_source::kafka: return "kafka";
  }
  return "?";
}

int job_data_input_slots(const data_spec& d) {
  return d.source == data_source::synthetic ? d.synthetic.slots + (d.synthetic.history > 0 ? 1 : 0)
                                            : text_format_slots(d.format);
}

unpooled_sequences job_data_sequences(const data_spec& d) {
  if (d.source == data_source::synthetic) {
    unpooled_sequences out;
    if (d.synthetic.history > 0 && d.synthetic.history_unpooled) {
      out.slots.push_back(d.synthetic.slots);
      out.lengths.push_back(d.synthetic.history);
      out.names.push_back("history");
    }
    return out;
  }
  if (d.format.features.empty())
    return {};
  auto layout = feature_schema_layout(d.format.features, pooling::sum);
  return layout ? layout->sequences : unpooled_sequences{};
}

int job_data_slots(const data_spec& d) {
  return job_data_sequences(d).model_slots(job_data_input_slots(d)
                                           + static_cast<int>(d.crosses.size()));
}

double job_synthetic_ids_per_slot(const data_spec& d) {
  auto& b = d.synthetic.bag_sizes;
  if (b.empty())
    return std::max(1, d.synthetic.ids_per_sample);
  double sum = 0.0;
  for (int x : b)
    sum += x;
  return sum / static_cast<double>(b.size());
}

int job_data_dense_features(const data_spec& d) {
  return job_data_sequences(d).model_dense(d.source == data_source::synthetic
                                             ? d.synthetic.dense_features
                                             : text_format_dense_features(d.format));
}

std::vector<pooling> job_slot_pooling(const job_spec& spec) {
  auto& d = spec.data;
  std::vector<pooling> input;
  if (!d.format.features.empty() && d.source != data_source::synthetic) {
    auto layout = feature_schema_layout(d.format.features, spec.model.pool);
    if (!layout)
      return {};
    input = layout->slot_pool;
  } else if (d.source == data_source::synthetic && d.synthetic.history > 0) {
    input.assign(static_cast<size_t>(d.synthetic.slots), spec.model.pool);
    input.push_back(d.synthetic.history_pool);
  } else {
    return {};
  }
  input.insert(input.end(), d.crosses.size(), spec.model.pool);
  return job_data_sequences(d).model_pooling(input);
}

namespace job_spec_detail {

namespace {

// One feature's map; "" or what is wrong with it (without the feature's name).
std::string parse_feature(const YAML::Node& node, feature_spec& f) {
  if (!node.IsMap())
    return "expected a map {name, kind, table, pooling, max_length, weights}";
  for (auto it = node.begin(); it != node.end(); ++it) {
    // (copies: yaml-cpp's it-> is a temporary proxy; a reference into it would dangle)
    const YAML::Node k = it->first, v = it->second;
    auto key = k.IsScalar() ? k.Scalar() : std::string("?");
    if (!v.IsScalar())
      return key + ": expected a single value";
    auto text = v.Scalar();
    std::string want;
    if (key == "name") {
      f.name = text;
    } else if (key == "kind") {
      want = parse_enum(text, f.kind,
                        {{"id", feature_kind::id},
                         {"bag", feature_kind::bag},
                         {"sequence", feature_kind::sequence},
                         {"dense", feature_kind::dense}});
    } else if (key == "table") {
      f.table = text;
    } else if (key == "pooling") {
      f.unpooled = text == "none";
      if (!f.unpooled
          && !parse_enum(
                text, f.pool,
                {{"sum", pooling::sum}, {"mean", pooling::mean}, {"sqrtn", pooling::sqrtn}})
                .empty())
        want = "one of sum mean sqrtn none (none: a sequence reaches the model unpooled)";
      f.pool_given = true;
    } else if (key == "max_length") {
      want = parse_int(text, f.max_length, 1, feature_ids_max);
    } else if (key == "weights") {
      want = parse_enum(text, f.weights, {{"true", true}, {"false", false}});
    } else {
      return "unknown key '" + key
             + "' (expected name, kind, table, pooling, max_length or weights)";
    }
    if (!want.empty())
      return key + ": expected " + want + ", got '" + text + "'";
  }
  return "";
}

}  // namespace

std::string parse_features(const std::string& text, feature_schema& out) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return "data.features: not valid YAML: " + e.msg;
  }
  if (root.IsNull()) {
    out.clear();
    return "";
  }
  if (!root.IsSequence())
    return "data.features: expected a list of features, e.g. [{name: user, kind: id}, "
           "{name: tags, kind: bag, pooling: mean}]";
  if (root.size() > feature_schema_max)
    return "data.features: expected at most " + std::to_string(feature_schema_max)
           + " features, got " + std::to_string(root.size());
  feature_schema v;
  for (size_t i = 0; i < root.size(); ++i) {
    feature_spec f;
    auto want = parse_feature(root[i], f);
    if (want.empty() && f.name.empty())
      want = "name: expected the feature's name";
    if (!want.empty()) {
      auto who = f.name.empty() ? "data.features[" + std::to_string(i) + "]"
                                : "data.features: feature '" + f.name + "'";
      return who + ": " + want;
    }
    v.push_back(std::move(f));
  }
  if (auto layout = feature_schema_layout(v, pooling::sum); !layout)
    return layout.error();
  out = std::move(v);
  return "";
}

std::vector<job_field> data_fields() {
  return {
    SATRAP_ENUM_FIELD("data.source", "source", "where batches come from", data.source,
                      {"synthetic", data_source::synthetic}, {"criteo", data_source::criteo},
                      {"libsvm", data_source::libsvm}, {"libfm", data_source::libfm},
                      {"libffm", data_source::libffm}, {"jsonl", data_source::jsonl},
                      {"tfrecord", data_source::tfrecord}, {"kafka", data_source::kafka}),
    SATRAP_STRING_FIELD("data.kafka.brokers", "kafka-brokers",
                        "kafka: bootstrap brokers, host:port[,host:port...] (a real Kafka)",
                        data.kafka.brokers),
    SATRAP_LIST_FIELD("data.kafka.topics", "kafka-topics",
                      "kafka: the topics read (every partition of each)", data.kafka.topics),
    SATRAP_STRING_FIELD("data.kafka.group", "kafka-group",
                        "kafka: consumer group the checkpointed offsets are committed to (lag "
                        "monitoring; never read back); \"\": none",
                        data.kafka.group),
    SATRAP_ENUM_FIELD("data.kafka.format", "kafka-format",
                      "kafka: each message is a JSON-lines object, a serialized TFRecord Example "
                      "or a Criteo TSV line",
                      data.kafka_format, {"jsonl", text_format::jsonl},
                      {"tfrecord", text_format::tfrecord}, {"criteo", text_format::criteo}),
    job_field{"data.kafka.start", "kafka-start",
              "kafka: where a new job starts reading: earliest, latest or a time (ms since the "
              "epoch); resolved once and kept in checkpoint.dir",
              [](job_spec& s, const std::string& t) -> std::string {
                auto& k = s.data.kafka;
                if (t == "earliest" || t == "latest") {
                  k.start = t == "earliest" ? kafka_start::earliest : kafka_start::latest;
                  return "";
                }
                k.start = kafka_start::timestamp;
                auto want = parse_int(t, k.start_ms, int64_t{0}, i64max);
                return want.empty() ? "" : "earliest, latest or a time in ms since the epoch";
              },
              [](const job_spec& s) {
                auto& k = s.data.kafka;
                return k.start == kafka_start::timestamp ? std::to_string(k.start_ms)
                       : k.start == kafka_start::latest  ? std::string("latest")
                                                         : std::string("earliest");
              }},
    SATRAP_ENUM_FIELD("data.kafka.end", "kafka-end",
                      "kafka: none (read until cancelled; training.train_batches ends the job) or "
                      "end_offsets (the partitions' ends when the job starts)",
                      data.kafka.end, {"none", kafka_end::none},
                      {"end_offsets", kafka_end::end_offsets}),
    SATRAP_STRING_FIELD("data.kafka.trace_file", "kafka-trace",
                        "kafka: append each batch's topic, partition and offsets to this file "
                        "(JSON lines; which messages were trained); \"\": none",
                        data.kafka.trace_file),
    job_field{"data.kafka.config", "",
              "kafka: extra librdkafka settings, each key=value (e.g. security.protocol=ssl)",
              [](job_spec& s, const std::string& t) -> std::string {
                s.data.kafka.config.clear();
                for (auto& item : split_list(t)) {
                  auto eq = item.find('=');
                  if (eq == std::string::npos || eq == 0)
                    return "key=value settings, e.g. [security.protocol=ssl]";
                  s.data.kafka.config.emplace_back(item.substr(0, eq), item.substr(eq + 1));
                }
                return "";
              },
              [](const job_spec& s) {
                std::vector<std::string> v;
                for (auto& [k, x] : s.data.kafka.config)
                  v.push_back(k + "=" + x);
                return show_list(v);
              },
              true},
    job_field{
      "data.features", "",
      "jsonl: the named features of a sample, each {name, kind: id|bag|sequence|dense, "
      "table, pooling: sum|mean|sqrtn, max_length, weights}",
      [](job_spec& s, const std::string& t) { return parse_features(t, s.data.format.features); },
      [](const job_spec& s) { return feature_schema_text(s.data.format.features); }, false, false,
      true},
    SATRAP_LIST_FIELD("data.labels", "labels",
                      "the labels, one task each: jsonl keys (e.g. [click, purchase]); synthetic "
                      "[click, purchase] is the two-label teacher",
                      data.labels),
    SATRAP_LIST_FIELD("data.train_files", "train-files", "training data files (paths or globs)",
                      data.train_files),
    SATRAP_LIST_FIELD("data.test_files", "test-files",
                      "test data files; none: hold out data.test_fraction", data.test_files),
    SATRAP_LIST_FIELD(
      "data.validation_files", "validation-files",
      "validation data files (model choice, never trained on); none: data.validation_fraction",
      data.validation_files),
    SATRAP_REAL_FIELD(
      "data.validation_fraction", "validation-fraction",
      "without validation files: this fraction of training rows (by a hash of row and data.seed) validates",
      data.reading.validation_fraction, 0.0, 0.9),
    SATRAP_REAL_FIELD("data.test_fraction", "",
                      "without test files: the tail of the training data held out",
                      data.reading.test_fraction, 0.0, 0.99),
    SATRAP_INT_FIELD("data.slots", "", "libsvm by position / libffm: sparse slots per sample",
                     data.format.slots, 0, 1024),
    job_field{
      "data.field_starts", "", "libsvm / libfm: first feature id of each slot",
      [](job_spec& s, const std::string& t) { return parse_ids(t, s.data.format.field_starts); },
      [](const job_spec& s) {
        std::vector<std::string> ids;
        for (auto id : s.data.format.field_starts)
          ids.push_back(std::to_string(id));
        return show_list(ids, ", ");
      },
      true},
    SATRAP_ENUM_FIELD("data.value_weights", "",
                      "libsvm / libfm / libffm: a feature's value is its pooling weight (several "
                      "ids of one field: a weighted bag); false: any nonzero value is presence",
                      data.format.value_weights, {"false", false}, {"true", true}),
    job_field{"data.crosses", "cross",
              "feature crosses: each a list of 2 or more sparse slots (e.g. user, item) whose ids "
              "are hashed into one extra slot (flag: one cross A,B per use)",
              [](job_spec& s, const std::string& t) { return parse_crosses(t, s.data.crosses); },
              [](const job_spec& s) { return show_crosses(s.data.crosses); }, true, true},
    SATRAP_ENUM_FIELD("data.on_error", "on-error", "a bad input line", data.on_error,
                      {"fail", on_error_policy::fail}, {"skip", on_error_policy::skip}),
    SATRAP_ENUM_FIELD("data.shuffle", "", "reshuffle the training data every epoch",
                      data.reading.shuffle, {"true", true}, {"false", false}),
    SATRAP_INT_FIELD("data.shuffle_window", "", "samples per shuffle window",
                     data.reading.shuffle_window, int64_t{1}, i64max),
    SATRAP_INT_FIELD("data.seed", "", "shuffle seed", data.reading.seed, uint64_t{0}, u64max),
    SATRAP_INT_FIELD("data.chunk_samples", "", "samples per cache chunk file", data.chunk_samples,
                     uint32_t{1}, uint32_t{1} << 24),
    SATRAP_STRING_FIELD("data.cache_dir", "", "converted data sets; \"\": $TMPDIR/satrap-cache",
                        data.cache_dir),
    SATRAP_INT_FIELD("data.cache_max_mib", "cache-max-mib",
                     "size cap of data.cache_dir: least recently used data sets beyond it are "
                     "deleted (never the job's own; 0: no cap)",
                     data.cache_max_mib, int64_t{0}, i64max),
    SATRAP_INT_FIELD("data.synthetic.slots", "slots", "sparse slots per sample",
                     data.synthetic.slots, 1, 1024),
    SATRAP_INT_FIELD("data.synthetic.vocab", "vocab", "distinct ids per slot", data.synthetic.vocab,
                     uint64_t{1}, uint64_t{1} << 40),
    SATRAP_REAL_FIELD("data.synthetic.zipf_exponent", "zipf", "id popularity exponent",
                      data.synthetic.zipf_exponent, 0.0, 10.0),
    SATRAP_INT_FIELD("data.synthetic.ids_per_sample", "ids-per-sample", "ids per slot per sample",
                     data.synthetic.ids_per_sample, 1, 1024),
    job_field{"data.synthetic.bag_sizes", "bag-sizes",
              "per slot, its bag size (e.g. MLPerf DLRM-v2's 3,2,1,2,6,...); empty: "
              "data.synthetic.ids_per_sample in every slot",
              [](job_spec& s, const std::string& t) {
                std::vector<int> v;
                if (!parse_sizes(t, v).empty()
                    || std::any_of(v.begin(), v.end(), [](int x) { return x > feature_ids_max; }))
                  return std::string(
                    "a list of bag sizes in [1, 65536], one per slot, e.g. [3, 2, 1]");
                s.data.synthetic.bag_sizes = std::move(v);
                return std::string{};
              },
              [](const job_spec& s) { return show_sizes(s.data.synthetic.bag_sizes); }, true},
    SATRAP_INT_FIELD("data.synthetic.history", "history",
                     "a user history of up to this many items (a sequence in slot 1's item table, "
                     "after the other slots) and a target-attention teacher; 0: none",
                     data.synthetic.history, 0, 4096),
    SATRAP_REAL_FIELD("data.synthetic.history_weight", "",
                      "the teacher's weight on the candidate's closest past item",
                      data.synthetic.history_weight, 0.0, 20.0),
    job_field{"data.synthetic.history_pooling", "history-pooling",
              "how the model gets the history: none (unpooled, [B, history, E], for model.type "
              "torchscript), sum, mean or sqrtn",
              [](job_spec& s, const std::string& t) {
                auto& syn = s.data.synthetic;
                syn.history_unpooled = t == "none";
                if (syn.history_unpooled)
                  return std::string{};
                return parse_enum(
                  t, syn.history_pool,
                  {{"sum", pooling::sum}, {"mean", pooling::mean}, {"sqrtn", pooling::sqrtn}});
              },
              [](const job_spec& s) {
                auto& syn = s.data.synthetic;
                return std::string(syn.history_unpooled ? "none"
                                                        : feature_pooling_name(syn.history_pool));
              }},
    SATRAP_INT_FIELD("data.synthetic.dense_features", "dense-features", "dense features per sample",
                     data.synthetic.dense_features, 1, 4096),
    SATRAP_INT_FIELD("data.synthetic.seed", "data-seed", "data and teacher seed",
                     data.synthetic.seed, uint64_t{0}, u64max),
    SATRAP_REAL_FIELD("data.synthetic.teacher_bias", "", "teacher base logit",
                      data.synthetic.teacher_bias, -20.0, 20.0),
    SATRAP_REAL_FIELD("data.synthetic.teacher_id_std", "", "std of the per-id effects",
                      data.synthetic.teacher_id_std, 0.0, 20.0),
    SATRAP_INT_FIELD("data.synthetic.teacher_latent_dim", "", "teacher latent size",
                     data.synthetic.teacher_latent_dim, 1, 1024),
    SATRAP_REAL_FIELD("data.synthetic.teacher_pair_std", "", "std of the pairwise effects",
                      data.synthetic.teacher_pair_std, 0.0, 20.0),
    SATRAP_REAL_FIELD("data.synthetic.teacher_dense_std", "", "std of the dense effects",
                      data.synthetic.teacher_dense_std, 0.0, 20.0),
  };
}

// The file format follows data.source; checks what the data keys need together.
caf::error data_finalize(job_spec& spec) {
  auto& d = spec.data;
  if (d.labels.empty() || d.labels.size() > text_labels_max)
    return bad_spec("data.labels: expected 1 to " + std::to_string(text_labels_max)
                    + " label names, got " + std::to_string(d.labels.size()));
  for (size_t i = 0; i < d.labels.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (d.labels[i] == d.labels[j])
        return bad_spec("data.labels: expected each name once; '" + d.labels[i] + "' is twice");
  d.format.labels = d.labels;
  d.synthetic.tasks = 1;
  if (d.source == data_source::synthetic && d.labels.size() > 1) {
    if (d.labels.size() != 2)
      return bad_spec(
        "data.labels: synthetic data has one label, or two (a click and a purchase given the "
        "click, e.g. [click, purchase]); got "
        + std::to_string(d.labels.size()));
    d.synthetic.tasks = 2;
  }
  auto& weights = spec.training.task_weights;
  if (!weights.empty() && weights.size() != d.labels.size())
    return bad_spec("training.task_weights: expected one weight per label of data.labels ("
                    + std::to_string(d.labels.size()) + "), got " + std::to_string(weights.size()));
  const bool stream = d.source == data_source::kafka;
  const bool named = d.source == data_source::jsonl || d.source == data_source::tfrecord
                     || (stream && text_format_named(d.kafka_format));
  if (!stream) {
    // (A job's text names every key, defaults included: a value given is what counts.)
    const auto& k = d.kafka;
    const char* given = !k.brokers.empty()      ? "data.kafka.brokers"
                        : !k.topics.empty()     ? "data.kafka.topics"
                        : !k.group.empty()      ? "data.kafka.group"
                        : !k.trace_file.empty() ? "data.kafka.trace_file"
                        : !k.config.empty()     ? "data.kafka.config"
                                                : nullptr;
    if (given)
      return bad_spec(std::string(given) + ": expected data.source kafka, got "
                      + data_source_name(d.source));
  } else {
    if (d.kafka.brokers.empty())
      return bad_spec(
        "data.kafka.brokers: expected the bootstrap brokers (host:port[,host:port...]) for "
        "data.source kafka");
    if (d.kafka.topics.empty())
      return bad_spec("data.kafka.topics: expected at least one topic for data.source kafka");
    for (auto* files : {&d.train_files, &d.test_files, &d.validation_files})
      if (!files->empty())
        return bad_spec(
          "data.train_files / data.test_files / data.validation_files: expected none for "
          "data.source kafka (the stream is the training data; it has no test split)");
    if (d.reading.validation_fraction > 0.0)
      return bad_spec("data.validation_fraction: expected 0 for data.source kafka");
  }
  if (!d.format.features.empty() || named) {
    if (!named)
      return bad_spec(
        std::string(
          "data.features: expected data.source jsonl or tfrecord, or kafka with data.kafka.format jsonl or tfrecord (the features of ")
        + data_source_name(d.source) + " data are its slots, slot_0, slot_1, ...)");
    if (d.format.features.empty())
      return bad_spec(
        std::string("data.features: expected the named features of each sample for data.source ")
        + data_source_name(d.source) + ", e.g. [{name: user, kind: id}, {name: tags, kind: bag}]");
    if (auto layout = feature_schema_layout(d.format.features, spec.model.pool); !layout)
      return bad_spec(layout.error());
    for (auto& f : d.format.features)
      for (auto& l : d.labels)
        if (f.name == l)
          return bad_spec("data.labels: expected a name that no feature has ('" + l
                          + "' is a feature's name)");
    if (!d.crosses.empty())
      return bad_spec(
        "data.crosses: not yet supported with data.features (name a cross as a "
        "feature of the data instead)");
  } else if (d.source != data_source::synthetic && spec.keys_set.count("data.labels") > 0
             && (d.labels.size() != 1 || d.labels[0] != "label")) {
    return bad_spec(
      "data.labels: expected data.source jsonl or tfrecord (the other formats' one label is "
      "their first field)");
  }
  if (d.format.value_weights && d.source != data_source::libsvm && d.source != data_source::libfm
      && d.source != data_source::libffm)
    return bad_spec(std::string("data.value_weights: expected data.source libsvm, libfm or libffm "
                                "(their idx:value pairs), got ")
                    + data_source_name(d.source));
  if (d.source != data_source::synthetic) {
    d.format.format = stream                              ? d.kafka_format
                      : d.source == data_source::criteo   ? text_format::criteo
                      : d.source == data_source::libffm   ? text_format::libffm
                      : d.source == data_source::jsonl    ? text_format::jsonl
                      : d.source == data_source::tfrecord ? text_format::tfrecord
                                                          : text_format::libsvm;
    if (auto format = text_format_check(d.format); !format)
      return bad_spec("data: expected " + format.error() + " for data.source "
                      + data_source_name(d.source));
    if (d.train_files.empty() && !stream)
      return bad_spec("data.train_files: expected at least one file for data.source "
                      + std::string(data_source_name(d.source)));
  }
  if (!d.synthetic.bag_sizes.empty()
      && (d.source != data_source::synthetic
          || d.synthetic.bag_sizes.size() != static_cast<size_t>(d.synthetic.slots)))
    return bad_spec(d.source != data_source::synthetic
                      ? std::string("data.synthetic.bag_sizes: expected data.source synthetic")
                      : "data.synthetic.bag_sizes: expected one size per slot ("
                          + std::to_string(d.synthetic.slots) + ", data.synthetic.slots), got "
                          + std::to_string(d.synthetic.bag_sizes.size()));
  if (d.synthetic.history > 0 && d.source != data_source::synthetic)
    return bad_spec(
      "data.synthetic.history: expected data.source synthetic (file data names its "
      "sequences in data.features)");
  if (d.synthetic.history > 0 && d.synthetic.slots < 2)
    return bad_spec(
      "data.synthetic.history: expected data.synthetic.slots >= 2 (slot 0 is the "
      "user, slot 1 the candidate item); got "
      + std::to_string(d.synthetic.slots));
  for (int s : job_data_sequences(d).slots)
    for (auto& cross : d.crosses)
      if (std::find(cross.begin(), cross.end(), s) != cross.end())
        return bad_spec("data.crosses: slot " + std::to_string(s)
                        + " is an unpooled sequence, which a cross cannot take");
  if (auto crosses = check_crosses(d.crosses, job_data_input_slots(d)); !crosses)
    return bad_spec(crosses.error());
  if (!d.validation_files.empty() && d.reading.validation_fraction > 0.0)
    return bad_spec(
      "data.validation_fraction: expected 0 when data.validation_files is given (one "
      "validation split)");
  if (d.source == data_source::synthetic
      && (!d.validation_files.empty() || d.reading.validation_fraction > 0.0))
    return bad_spec(
      "data.validation_files / data.validation_fraction: synthetic data has a validation "
      "stream instead: set training.validation_batches");
  return caf::none;
}

}  // namespace job_spec_detail
}  // namespace satrap
