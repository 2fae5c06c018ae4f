#include "models/data/text_format.hpp"

#include "models/data/batch.hpp"
#include "models/data/jsonl_format.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace satrap {

namespace {

using sv = std::string_view;

parse_error error_at(sv line, const char* at, const char* reason, std::string expected) {
  return parse_error{static_cast<int>(at - line.data()) + 1, reason, std::move(expected)};
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

// Whitespace-separated tokens of a libsvm/libffm line, one at a time.
struct tokenizer {
  sv line;
  size_t pos = 0;
  bool next(sv& token) {
    while (pos < line.size() && is_space(line[pos]))
      ++pos;
    if (pos == line.size())
      return false;
    auto start = pos;
    while (pos < line.size() && !is_space(line[pos]))
      ++pos;
    token = line.substr(start, pos - start);
    return true;
  }
};

template <class T>
bool parse_uint(sv text, T& out) {
  if (text.empty() || text[0] == '-' || text[0] == '+')
    return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && p == text.data() + text.size();
}

bool parse_float(sv text, double& out) {
  if (!text.empty() && text[0] == '+')
    text.remove_prefix(1);
  if (text.empty() || text[0] == '+')
    return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && p == text.data() + text.size() && std::isfinite(out);
}

// libsvm labels: -1, 0, 1 (any float spelling); > 0 is a click.
std::optional<parse_error> parse_svm_label(sv line, sv token, float& label) {
  double v = 0;
  if (!parse_float(token, v) || !(v == -1.0 || v == 0.0 || v == 1.0))
    return error_at(line, token.data(), "bad_label", "a label -1, 0 or 1");
  label = v > 0 ? 1.0f : 0.0f;
  return std::nullopt;
}

std::optional<parse_error> parse_feature_value(sv line, sv text, bool& present, float& value) {
  double v = 0;
  if (!parse_float(text, v) || std::fabs(v) > 3.0e38)
    return error_at(line, text.data(), "bad_value", "a finite number after ':'");
  present = v != 0.0;
  value = static_cast<float>(v);
  return std::nullopt;
}

// Appends a present feature (and its weight, with value_weights).
void add_feature(const text_format_options& o, text_sample& out, int slot, uint64_t idx,
                 float value) {
  out.features.emplace_back(slot, slot_id_hash(slot, idx));
  if (o.value_weights)
    out.weights.push_back(value);
}

// The label that opens a libsvm / libffm line.
std::optional<parse_error> parse_leading_label(sv line, tokenizer& tok, text_sample& out) {
  sv token;
  if (!tok.next(token))
    return error_at(line, line.data(), "bad_label", "a label");
  return parse_svm_label(line, token, out.label);
}

std::optional<parse_error> parse_libsvm(sv line, const text_format_options& o, text_sample& out) {
  tokenizer tok{line};
  sv token;
  if (auto e = parse_leading_label(line, tok, out))
    return e;
  int position = 0;
  const auto slots = text_format_slots(o);
  while (tok.next(token)) {
    auto colon = token.find(':');
    if (colon == sv::npos)
      return error_at(line, token.data(), "bad_feature", "a feature idx:value");
    uint64_t idx = 0;
    if (!parse_uint(token.substr(0, colon), idx) || idx >= (uint64_t{1} << 62))
      return error_at(line, token.data(), "bad_index", "a feature index in [0, 2^62)");
    bool present = false;
    float value = 0.0f;
    if (auto e = parse_feature_value(line, token.substr(colon + 1), present, value))
      return e;
    int slot = position++;
    if (!o.field_starts.empty()) {
      auto it =
        std::upper_bound(o.field_starts.begin(), o.field_starts.end(), static_cast<int64_t>(idx));
      if (it == o.field_starts.begin())
        return error_at(
          line, token.data(), "index_out_of_range",
          "a feature index >= the first field start " + std::to_string(o.field_starts.front()));
      slot = static_cast<int>(it - o.field_starts.begin()) - 1;
    } else if (slot >= slots) {
      return error_at(line, token.data(), "too_many_features",
                      "at most " + std::to_string(slots) + " features (data.slots)");
    }
    if (present)
      add_feature(o, out, slot, idx, value);
  }
  out.dense.assign(1, 1.0f);
  return std::nullopt;
}

std::optional<parse_error> parse_libffm(sv line, const text_format_options& o, text_sample& out) {
  tokenizer tok{line};
  sv token;
  if (auto e = parse_leading_label(line, tok, out))
    return e;
  while (tok.next(token)) {
    auto c1 = token.find(':');
    auto c2 = c1 == sv::npos ? sv::npos : token.find(':', c1 + 1);
    if (c2 == sv::npos)
      return error_at(line, token.data(), "bad_feature", "a feature field:idx:value");
    int field = 0;
    if (!parse_uint(token.substr(0, c1), field) || field >= o.slots)
      return error_at(line, token.data(), "bad_field",
                      "a field in [0, " + std::to_string(o.slots) + ") (data.slots)");
    uint64_t idx = 0;
    auto idx_text = token.substr(c1 + 1, c2 - c1 - 1);
    if (!parse_uint(idx_text, idx) || idx >= (uint64_t{1} << 62))
      return error_at(line, idx_text.data(), "bad_index", "a feature index in [0, 2^62)");
    bool present = false;
    float value = 0.0f;
    if (auto e = parse_feature_value(line, token.substr(c2 + 1), present, value))
      return e;
    if (present)
      add_feature(o, out, field, idx, value);
  }
  out.dense.assign(1, 1.0f);
  return std::nullopt;
}

std::optional<parse_error> parse_criteo_field(sv line, sv field, int index, text_sample& out) {
  if (index == 0) {
    if (field != "0" && field != "1")
      return error_at(line, field.data(), "bad_label", "a label 0 or 1");
    out.label = field == "1" ? 1.0f : 0.0f;
  } else if (index <= criteo_dense_features) {
    int64_t v = 0;
    if (!field.empty()) {
      sv digits = field[0] == '-' ? field.substr(1) : field;
      if (!parse_uint(digits, v))
        return error_at(line, field.data(), "bad_integer",
                        "an integer count in field " + std::to_string(index + 1) + " (or nothing)");
    }
    auto x = field.empty() || field[0] == '-' ? 0.0 : std::log1p(static_cast<double>(v));
    out.dense.push_back(static_cast<float>(x));
  } else {
    int slot = index - criteo_dense_features - 1;
    uint64_t v = 0;
    if (field.empty()) {
      out.features.emplace_back(slot, missing_id(slot));
      return std::nullopt;
    }
    auto [p, ec] = std::from_chars(field.data(), field.data() + field.size(), v, 16);
    if (field.size() > 16 || field[0] == '-' || field[0] == '+' || ec != std::errc{}
        || p != field.data() + field.size())
      return error_at(line, field.data(), "bad_category",
                      "a hexadecimal category of 1 to 16 digits in field "
                        + std::to_string(index + 1) + " (or nothing)");
    out.features.emplace_back(slot, slot_id_hash(slot, v));
  }
  return std::nullopt;
}

std::optional<parse_error> parse_criteo(sv line, text_sample& out) {
  constexpr int fields = 1 + criteo_dense_features + criteo_categories;
  int index = 0;
  size_t start = 0;
  while (true) {
    auto tab = line.find('\t', start);
    auto field = line.substr(start, tab == sv::npos ? sv::npos : tab - start);
    if (index == fields)
      return error_at(line, field.data() - 1, "too_many_fields", "40 tab-separated fields");
    if (auto e = parse_criteo_field(line, field, index, out))
      return e;
    ++index;
    if (tab == sv::npos)
      break;
    start = tab + 1;
  }
  if (index < fields)
    return error_at(line, line.data() + line.size(), "too_few_fields",
                    "40 tab-separated fields, got " + std::to_string(index));
  return std::nullopt;
}

}  // namespace

int text_format_slots(const text_format_options& o) {
  switch (o.format) {
    case text_format::criteo: return criteo_categories;
    case text_format::libsvm:
      return o.field_starts.empty() ? o.slots : static_cast<int>(o.field_starts.size());
    case text_format::libffm: return o.slots;
    case text_format::jsonl:
    case text_format::tfrecord: {
      auto layout = feature_schema_layout(o.features, pooling::sum);
      return layout ? layout->slots : 0;
    }
  }
  return 0;
}

int text_format_tasks(const text_format_options& o) {
  return text_format_named(o.format) ? std::max<int>(1, static_cast<int>(o.labels.size())) : 1;
}

int text_format_dense_features(const text_format_options& o) {
  if (text_format_named(o.format)) {
    auto layout = feature_schema_layout(o.features, pooling::sum);
    return layout && layout->dense > 0 ? layout->dense : 1;
  }
  return o.format == text_format::criteo ? criteo_dense_features : 1;
}

result<ok_t> text_format_check(const text_format_options& o) {
  if (o.format == text_format::criteo)
    return ok_t{};
  if (text_format_named(o.format)) {
    if (o.features.empty())
      return make_input_error(
        "data.features (the named features of each sample) for jsonl and tfrecord data");
    if (auto layout = feature_schema_layout(o.features, pooling::sum); !layout)
      return layout.failure();
    if (o.labels.empty() || o.labels.size() > text_labels_max)
      return make_input_error("data.labels: 1 to " + std::to_string(text_labels_max)
                              + " label names");
    for (size_t i = 0; i < o.labels.size(); ++i) {
      for (auto& f : o.features)
        if (f.name == o.labels[i])
          return make_input_error("data.labels: a name that no feature has ('" + o.labels[i]
                                  + "' is a feature)");
      for (size_t j = 0; j < i; ++j)
        if (o.labels[j] == o.labels[i])
          return make_input_error("data.labels: each name once ('" + o.labels[i] + "' twice)");
    }
    return ok_t{};
  }
  if (!o.field_starts.empty()) {
    if (o.format != text_format::libsvm)
      return make_input_error("data.field_starts only for libsvm / libfm data");
    if (!std::is_sorted(o.field_starts.begin(), o.field_starts.end())
        || std::adjacent_find(o.field_starts.begin(), o.field_starts.end()) != o.field_starts.end()
        || o.field_starts.front() < 0)
      return make_input_error("data.field_starts: strictly ascending ids >= 0");
    if (o.slots != 0 && o.slots != static_cast<int>(o.field_starts.size()))
      return make_input_error("data.slots: 0 or the number of data.field_starts");
    return ok_t{};
  }
  if (o.slots < 1)
    return make_input_error("data.slots >= 1 (or data.field_starts for libsvm / libfm)");
  return ok_t{};
}

uint64_t missing_id(int slot) { return slot_id_hash(-1 - slot, 0x6d697373696e67ULL); }

std::optional<parse_error> parse_text_line(sv line, const text_format_options& options,
                                           text_sample& out) {
  out.features.clear();
  out.weights.clear();
  out.dense.clear();
  out.label = 0.0f;
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  if (line.size() > text_line_bytes_max)
    return parse_error{1, "line_too_long",
                       "a line of at most " + std::to_string(text_line_bytes_max) + " bytes"};
  switch (options.format) {
    case text_format::criteo: return parse_criteo(line, out);
    case text_format::libsvm: return parse_libsvm(line, options, out);
    case text_format::libffm: return parse_libffm(line, options, out);
    case text_format::jsonl: {
      jsonl_parser parser(options);  // (a reader keeps one parser for all its lines)
      return parser.parse(line, out);
    }
    case text_format::tfrecord:
      return parse_error{1, "not_text", "TFRecord data is binary (tfrecord_format.hpp)"};
  }
  return std::nullopt;
}

}  // namespace satrap
