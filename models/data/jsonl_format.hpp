// JSON lines (`data.source: jsonl`): one JSON object per line, its features and label by name
// (data.features, feature_schema.hpp; data.labels):
//   {"label": 1, "user": 17, "item": "sku-42", "tags": [3, 9, 12], "history": [5, 8, 13],
//    "price": 12.5, "topics": {"ids": [7, 11], "weights": [0.8, 0.2]}}
//   label     0 or 1 (any number spelling, or false / true); data.labels may name several
//             (click, purchase, ...): each one a task, each in every line
//   id        an integer (signed or unsigned 64-bit) or a string; the string "7" and the integer 7
//             are different ids. null: no value (the slot's missing id)
//   bag       an array of ids ([] or null: the missing id); at most max_length ids
//   sequence  an array of ids, oldest first; the most recent max_length are kept
//   weights   a feature with weights: true is {"ids": [...], "weights": [...]}, one finite weight
//             per id
//   dense     a number
// Every feature of the schema and the label must be in every line (a missing one is an error);
// keys that are no feature are skipped, whatever their value. A bag or sequence of more than
// feature_ids_max ids is an error, and so is a key given twice. Errors name the 1-based byte
// column, a short fixed reason (bad_json, missing_feature, missing_label, wrong_type, bad_label,
// bad_weights, too_long, duplicate_key) and what was expected, with the feature's name.
// Threading: a parser has one owner (it keeps scratch space, so a line allocates nothing once
// the scratch has grown); options are read-only.
#pragma once

#include "models/data/feature_schema.hpp"
#include "models/data/text_format.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace satrap {

class jsonl_parser {
 public:
  // `options` must pass text_format_check with format jsonl, or do but for labels empty: a
  // served instance, no label read (models/serving/named_request.cpp).
  explicit jsonl_parser(const text_format_options& options);
  // Parses one line (without its '\n'); on success fills `out` (features grouped by slot in
  // schema order, sequences in their order; weights when some feature has them).
  std::optional<parse_error> parse(std::string_view line, text_sample& out);

 private:
  struct cursor;
  std::optional<parse_error> value(cursor& c, int feature);
  std::optional<parse_error> ids(cursor& c, int feature, bool weighted);
  std::optional<parse_error> one_id(cursor& c, int feature, uint64_t& id);
  std::optional<parse_error> weights(cursor& c, int feature);

  feature_schema schema_;
  feature_layout layout_;
  std::vector<std::string> labels_;
  std::vector<std::pair<std::string, int>> names_;  // sorted; label k is -1-k
  // Per line: whether each feature (and each label) was seen, and each sparse feature's ids.
  std::vector<char> seen_;
  std::vector<char> label_seen_;
  std::vector<std::vector<uint64_t>> ids_;
  std::vector<std::vector<float>> weights_;
  std::string scratch_;       // a string with escapes, decoded
  float dense_value_ = 0.0f;  // the dense feature value() read last
};

}  // namespace satrap
