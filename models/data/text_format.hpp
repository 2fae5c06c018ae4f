// Line parsers of the text data formats: Criteo TSV, libsvm / libfm, libffm (here), JSON lines
// (jsonl_format.hpp, by the feature schema of feature_schema.hpp).
//
//   criteo  label \t I1..I13 \t C1..C26: label 0 or 1; 13 integer counts (dense, log(1+x), a
//           negative or missing count reads 0); 26 hexadecimal categories (a missing one gets its
//           slot's own "missing" id). Exactly 40 tab-separated fields; empty fields allowed.
//   libsvm  label idx:val idx:val ... (libfm is the same format): label -1, 0, +1 or 1 (and 1.0
//           etc.), > 0 is a click. Features go to slots by `field_starts` (id ranges per field,
//           e.g. Frappe's) or, without them, by position (the i-th feature to slot i).
//   libffm  label field:idx:val ...: the field is the slot.
// Values of libsvm/libffm features are presence: 0 drops the feature, any other finite number
// keeps it (embeddings are pooled unweighted); with value_weights (data.value_weights) the value is
// the id's pooling weight (sample.weights), so several ids of one field are a weighted bag. A slot left empty gets its missing id, so no bag is
// empty. Separators are spaces or tabs; a trailing '\r' (CRLF files) is tolerated.
// Errors name the 1-based byte column, a short fixed reason (counted under on_error: skip) and
// what was expected.
// Threading: pure functions over one line; options are read-only.
#pragma once

#include "models/data/feature_schema.hpp"
#include "models/result.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace satrap {

enum class text_format { criteo, libsvm, libffm, jsonl, tfrecord };

// JSON lines and TFRecord: samples of named features (data.features) and labels (data.labels).
inline bool text_format_named(text_format f) {
  return f == text_format::jsonl || f == text_format::tfrecord;
}

struct text_format_options {
  text_format format = text_format::libsvm;  // how a line is laid out
  int slots =
    0;  // libsvm without field_starts: slots by position; libffm: fields (criteo: 26, fixed)
  std::vector<int64_t>
    field_starts;  // libsvm: first feature id of each slot, ascending; empty: by position
  bool value_weights = false;  // libsvm / libffm: a feature's value is its pooling weight
  feature_schema features;     // jsonl: the named features (feature_schema.hpp)
  std::vector<std::string> labels{"label"};  // jsonl: the labels' names (data.labels), tasks
};

constexpr int criteo_dense_features = 13;
constexpr int criteo_categories = 26;
constexpr size_t text_line_bytes_max = 1 << 20;  // longer lines are errors (reason line_too_long)

// Slots of a sample in this format (0 when the options are inconsistent: see text_format_check).
int text_format_slots(const text_format_options& options);
// Dense features: Criteo's 13; the other formats have none, so they get one constant 1.0 (the
// DLRM's bottom MLP then learns a bias vector that takes part in the interactions).
int text_format_dense_features(const text_format_options& options);
// Labels per sample: data.labels' count for jsonl, else 1.
int text_format_tasks(const text_format_options& options);
inline constexpr size_t text_labels_max = 16;
// Whether the options make sense; the error says what was expected.
result<ok_t> text_format_check(const text_format_options& options);

// One parsed sample.
struct text_sample {
  float label = 0.0f;                              // 0 or 1 (the first task's)
  std::vector<float> more_labels;                  // jsonl with several labels: tasks 2..
  std::vector<std::pair<int, uint64_t>> features;  // (slot, id hashed into the slot's id space)
  std::vector<float> weights;                      // empty, or one pooling weight per feature entry
  std::vector<float> dense;                        // text_format_dense_features values
};

struct parse_error {
  int column = 1;           // 1-based byte column where the problem starts
  const char* reason = "";  // short fixed name, e.g. bad_label
  std::string expected;     // what was expected there
};

// Parses one line (without its '\n'). On success returns nothing and fills `out`.
std::optional<parse_error> parse_text_line(std::string_view line,
                                           const text_format_options& options, text_sample& out);

// The id a slot's missing value gets (never equal to a present value's id in practice: a
// separate hash domain).
uint64_t missing_id(int slot);

}  // namespace satrap
