#include "models/data/jsonl_format.hpp"

#include "models/assert.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace satrap {

namespace {

using sv = std::string_view;

constexpr int skip_depth_max = 64;  // nesting of a skipped value, at most

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool number_char(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

void put_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

std::string for_feature(const std::string& what, const std::string& name) {
  std::string s = what;
  return s.append(" for feature '").append(name).append("'");
}

}  // namespace

struct jsonl_parser::cursor {
  sv line;
  size_t pos = 0;

  void ws() {
    while (pos < line.size() && is_ws(line[pos]))
      ++pos;
  }
  bool done() const { return pos >= line.size(); }
  char peek() const { return pos < line.size() ? line[pos] : '\0'; }
  parse_error error(size_t at, const char* reason, std::string expected) const {
    return parse_error{static_cast<int>(std::min(at, line.size())) + 1, reason,
                       std::move(expected)};
  }
  parse_error bad_json(const char* expected) const { return error(pos, "bad_json", expected); }

  // A string at pos (its opening quote); `out` views the line, or `scratch` when it had escapes.
  std::optional<parse_error> string(sv& out, std::string& scratch) {
    ++pos;  // the quote
    auto start = pos;
    bool escaped = false;
    while (pos < line.size() && line[pos] != '"') {
      auto c = static_cast<unsigned char>(line[pos]);
      if (c < 0x20)
        return bad_json("a string without control characters");
      if (c == '\\') {
        escaped = true;
        pos += 2;
      } else {
        ++pos;
      }
    }
    if (pos >= line.size())
      return bad_json("a closing '\"'");
    auto raw = line.substr(start, pos - start);
    ++pos;
    if (!escaped) {
      out = raw;
      return std::nullopt;
    }
    scratch.clear();
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '\\') {
        scratch.push_back(raw[i]);
        continue;
      }
      auto at = start + i;
      char e = raw[++i];
      switch (e) {
        case '"': scratch.push_back('"'); break;
        case '\\': scratch.push_back('\\'); break;
        case '/': scratch.push_back('/'); break;
        case 'b': scratch.push_back('\b'); break;
        case 'f': scratch.push_back('\f'); break;
        case 'n': scratch.push_back('\n'); break;
        case 'r': scratch.push_back('\r'); break;
        case 't': scratch.push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          if (i + 4 >= raw.size())
            return error(at, "bad_json", "\\u and 4 hexadecimal digits");
          auto [p, ec] = std::from_chars(raw.data() + i + 1, raw.data() + i + 5, cp, 16);
          if (ec != std::errc{} || p != raw.data() + i + 5)
            return error(at, "bad_json", "\\u and 4 hexadecimal digits");
          i += 4;
          put_utf8(scratch, cp);  // (a surrogate pair's halves are kept as they are)
          break;
        }
        default: return error(at, "bad_json", "an escape \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\u");
      }
    }
    out = scratch;
    return std::nullopt;
  }

  // A number's text at pos (checked by the caller's from_chars).
  sv number() {
    auto start = pos;
    while (pos < line.size() && number_char(line[pos]))
      ++pos;
    return line.substr(start, pos - start);
  }

  bool literal(sv word) {
    if (line.substr(pos, word.size()) != word)
      return false;
    pos += word.size();
    return true;
  }

  // Skips any JSON value.
  std::optional<parse_error> skip(std::string& scratch, int depth) {
    if (depth > skip_depth_max)
      return bad_json("values nested at most 64 deep");
    ws();
    char c = peek();
    if (c == '"') {
      sv s;
      return string(s, scratch);
    }
    if (c == '[' || c == '{') {
      const char close = c == '[' ? ']' : '}';
      ++pos;
      ws();
      if (peek() == close) {
        ++pos;
        return std::nullopt;
      }
      while (true) {
        if (close == '}') {
          ws();
          if (peek() != '"')
            return bad_json("a key (a string)");
          sv key;
          if (auto e = string(key, scratch))
            return e;
          ws();
          if (peek() != ':')
            return bad_json("':'");
          ++pos;
        }
        if (auto e = skip(scratch, depth + 1))
          return e;
        ws();
        if (peek() == ',') {
          ++pos;
          continue;
        }
        if (peek() == close) {
          ++pos;
          return std::nullopt;
        }
        return bad_json(close == ']' ? "',' or ']'" : "',' or '}'");
      }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      double v = 0;
      auto t = number();
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (ec != std::errc{} || p != t.data() + t.size())
        return bad_json("a number");
      return std::nullopt;
    }
    if (literal("true") || literal("false") || literal("null"))
      return std::nullopt;
    return bad_json("a value");
  }
};

jsonl_parser::jsonl_parser(const text_format_options& options)
    : schema_(options.features), labels_(options.labels) {
  auto layout = feature_schema_layout(schema_, pooling::sum);
  SATRAP_ASSERT(layout.ok(), "jsonl_parser: unchecked schema: {}", layout.error());
  layout_ = std::move(layout.value());
  for (size_t i = 0; i < schema_.size(); ++i)
    names_.emplace_back(schema_[i].name, static_cast<int>(i));
  for (size_t k = 0; k < labels_.size(); ++k)
    names_.emplace_back(labels_[k], -1 - static_cast<int>(k));
  label_seen_.assign(labels_.size(), 0);
  std::sort(names_.begin(), names_.end());
  seen_.assign(schema_.size(), 0);
  ids_.resize(schema_.size());
  weights_.resize(schema_.size());
}

std::optional<parse_error> jsonl_parser::one_id(cursor& c, int feature, uint64_t& id) {
  const int table = layout_.table_of[static_cast<size_t>(feature)];
  char ch = c.peek();
  if (ch == '"') {
    sv s;
    if (auto e = c.string(s, scratch_))
      return e;
    id = feature_string_id_hash(table, s);
    return std::nullopt;
  }
  if (ch == '-' || (ch >= '0' && ch <= '9')) {
    auto start = c.pos;
    auto t = c.number();
    std::from_chars_result r{};
    if (t[0] == '-') {
      int64_t v = 0;
      r = std::from_chars(t.data(), t.data() + t.size(), v);
      id = static_cast<uint64_t>(v);
    } else {
      r = std::from_chars(t.data(), t.data() + t.size(), id);
    }
    if (r.ec != std::errc{} || r.ptr != t.data() + t.size())
      return c.error(start, "wrong_type",
                     for_feature("an integer id (64-bit, no fraction or exponent) or a string id",
                                 schema_[static_cast<size_t>(feature)].name));
    id = feature_id_hash(table, id);
    return std::nullopt;
  }
  return c.error(
    c.pos, "wrong_type",
    for_feature("an id (an integer or a string)", schema_[static_cast<size_t>(feature)].name));
}

// An array of ids into ids_[feature] (a bag past its limit is too_long; a sequence keeps going up
// to feature_ids_max and is cut to its most recent max_length later).
std::optional<parse_error> jsonl_parser::ids(cursor& c, int feature, bool weighted) {
  auto& f = schema_[static_cast<size_t>(feature)];
  auto& out = ids_[static_cast<size_t>(feature)];
  const auto limit = static_cast<size_t>(
    f.kind == feature_kind::bag && f.max_length > 0 ? f.max_length : feature_ids_max);
  auto start = c.pos;
  if (c.peek() != '[')
    return c.error(c.pos, "wrong_type",
                   for_feature(weighted ? "\"ids\": an array of ids" : "an array of ids", f.name));
  ++c.pos;
  c.ws();
  if (c.peek() == ']') {
    ++c.pos;
    return std::nullopt;
  }
  while (true) {
    c.ws();
    uint64_t id = 0;
    if (auto e = one_id(c, feature, id))
      return e;
    if (out.size() == limit)
      return c.error(start, "too_long",
                     for_feature("at most " + std::to_string(limit) + " ids", f.name));
    out.push_back(id);
    c.ws();
    if (c.peek() == ',') {
      ++c.pos;
      continue;
    }
    if (c.peek() == ']') {
      ++c.pos;
      return std::nullopt;
    }
    return c.bad_json("',' or ']'");
  }
}

std::optional<parse_error> jsonl_parser::weights(cursor& c, int feature) {
  auto& f = schema_[static_cast<size_t>(feature)];
  auto& out = weights_[static_cast<size_t>(feature)];
  if (c.peek() != '[')
    return c.error(c.pos, "bad_weights", for_feature("\"weights\": an array of numbers", f.name));
  ++c.pos;
  c.ws();
  if (c.peek() == ']') {
    ++c.pos;
    return std::nullopt;
  }
  while (true) {
    c.ws();
    auto start = c.pos;
    auto t = c.number();
    double v = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc{} || p != t.data() + t.size() || !std::isfinite(v)
        || std::fabs(v) > 3.0e38)
      return c.error(start, "bad_weights", for_feature("a finite number (a weight)", f.name));
    if (out.size() == static_cast<size_t>(feature_ids_max))
      return c.error(
        start, "too_long",
        for_feature("at most " + std::to_string(feature_ids_max) + " weights", f.name));
    out.push_back(static_cast<float>(v));
    c.ws();
    if (c.peek() == ',') {
      ++c.pos;
      continue;
    }
    if (c.peek() == ']') {
      ++c.pos;
      return std::nullopt;
    }
    return c.bad_json("',' or ']'");
  }
}

std::optional<parse_error> jsonl_parser::value(cursor& c, int feature) {
  auto& f = schema_[static_cast<size_t>(feature)];
  c.ws();
  const auto start = c.pos;
  if (f.kind == feature_kind::dense) {
    char ch = c.peek();
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
      auto t = c.number();
      double v = 0;
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (ec == std::errc{} && p == t.data() + t.size() && std::isfinite(v)
          && std::fabs(v) <= 3.0e38) {
        dense_value_ = static_cast<float>(v);
        return std::nullopt;
      }
    }
    return c.error(start, "wrong_type", for_feature("a finite number", f.name));
  }
  if (c.literal("null"))  // no value: the missing id
    return std::nullopt;
  if (f.kind == feature_kind::id) {
    uint64_t id = 0;
    if (auto e = one_id(c, feature, id))
      return e;
    ids_[static_cast<size_t>(feature)].push_back(id);
    return std::nullopt;
  }
  if (!f.weights)
    return ids(c, feature, false);
  // {"ids": [...], "weights": [...]}
  if (c.peek() != '{')
    return c.error(
      start, "wrong_type",
      for_feature("{\"ids\": [...], \"weights\": [...]} (a feature with weights)", f.name));
  ++c.pos;
  bool have_ids = false, have_weights = false;
  while (true) {
    c.ws();
    if (c.peek() == '}' && !have_ids && !have_weights)
      break;
    if (c.peek() != '"')
      return c.bad_json("a key (a string)");
    auto key_at = c.pos;
    sv key;
    if (auto e = c.string(key, scratch_))
      return e;
    c.ws();
    if (c.peek() != ':')
      return c.bad_json("':'");
    ++c.pos;
    c.ws();
    if (key == "ids" && !have_ids) {
      have_ids = true;
      if (auto e = ids(c, feature, true))
        return e;
    } else if (key == "weights" && !have_weights) {
      have_weights = true;
      if (auto e = weights(c, feature))
        return e;
    } else {
      return c.error(key_at, "wrong_type",
                     for_feature("the keys \"ids\" and \"weights\", once each", f.name));
    }
    c.ws();
    if (c.peek() == ',') {
      ++c.pos;
      continue;
    }
    if (c.peek() != '}')
      return c.bad_json("',' or '}'");
    break;
  }
  ++c.pos;
  auto n = ids_[static_cast<size_t>(feature)].size();
  if (!have_ids || !have_weights || weights_[static_cast<size_t>(feature)].size() != n)
    return c.error(start, "bad_weights",
                   for_feature("\"ids\" and \"weights\" of the same length", f.name));
  return std::nullopt;
}

std::optional<parse_error> jsonl_parser::parse(sv line, text_sample& out) {
  out.features.clear();
  out.weights.clear();
  out.label = 0.0f;
  out.more_labels.assign(labels_.empty() ? 0 : labels_.size() - 1, 0.0f);
  out.dense.assign(static_cast<size_t>(std::max(layout_.dense, 1)), 1.0f);
  std::fill(seen_.begin(), seen_.end(), 0);
  std::fill(label_seen_.begin(), label_seen_.end(), 0);
  for (size_t i = 0; i < ids_.size(); ++i) {
    ids_[i].clear();
    weights_[i].clear();
  }
  if (line.size() > text_line_bytes_max)
    return parse_error{1, "line_too_long",
                       "a line of at most " + std::to_string(text_line_bytes_max) + " bytes"};
  cursor c{line, 0};
  c.ws();
  if (c.peek() != '{')
    return c.bad_json("a JSON object ('{')");
  ++c.pos;
  c.ws();
  bool empty = c.peek() == '}';
  if (empty)
    ++c.pos;
  while (!empty) {
    c.ws();
    if (c.peek() != '"')
      return c.bad_json("a key (a string)");
    auto key_at = c.pos;
    sv key;
    if (auto e = c.string(key, scratch_))
      return e;
    c.ws();
    if (c.peek() != ':')
      return c.bad_json("':'");
    ++c.pos;
    c.ws();
    auto it = std::lower_bound(names_.begin(), names_.end(), key,
                               [](const auto& a, sv k) { return sv(a.first) < k; });
    if (it == names_.end() || it->first != key) {
      if (auto e = c.skip(scratch_, 0))
        return e;
    } else if (it->second < 0) {  // a label
      const auto k = static_cast<size_t>(-1 - it->second);
      const std::string& label = labels_[k];
      if (label_seen_[k])
        return c.error(key_at, "duplicate_key", "the label '" + label + "' once");
      label_seen_[k] = 1;
      auto at = c.pos;
      double v = -1;
      if (c.literal("true"))
        v = 1;
      else if (c.literal("false"))
        v = 0;
      else if (c.peek() == '-' || (c.peek() >= '0' && c.peek() <= '9')) {
        auto t = c.number();
        auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (ec != std::errc{} || p != t.data() + t.size())
          v = -1;
      }
      if (!(v == 0.0 || v == 1.0))
        return c.error(at, "bad_label", "the label '" + label + "': 0, 1, false or true");
      (k == 0 ? out.label : out.more_labels[k - 1]) = static_cast<float>(v);
    } else {
      auto feature = static_cast<size_t>(it->second);
      if (seen_[feature])
        return c.error(key_at, "duplicate_key",
                       for_feature("each key once", schema_[feature].name));
      seen_[feature] = 1;
      if (auto e = value(c, it->second))
        return e;
      if (schema_[feature].kind == feature_kind::dense)
        out.dense[static_cast<size_t>(layout_.dense_of[feature])] = dense_value_;
    }
    c.ws();
    if (c.peek() == ',') {
      ++c.pos;
      continue;
    }
    if (c.peek() != '}')
      return c.bad_json("',' or '}'");
    ++c.pos;
    break;
  }
  c.ws();
  if (!c.done())
    return c.bad_json("the end of the line after the object (one object per line)");
  for (size_t k = 0; k < labels_.size(); ++k)
    if (!label_seen_[k])
      return c.error(line.size(), "missing_label", "the label '" + labels_[k] + "'");
  for (size_t i = 0; i < schema_.size(); ++i) {
    if (!seen_[i])
      return c.error(line.size(), "missing_feature", "the feature '" + schema_[i].name + "'");
    if (schema_[i].kind == feature_kind::dense)
      continue;
    const int slot = layout_.slot_of[i];
    auto& ids = ids_[i];
    size_t first = 0;
    if (schema_[i].kind == feature_kind::sequence
        && ids.size() > static_cast<size_t>(schema_[i].max_length))
      first = ids.size() - static_cast<size_t>(schema_[i].max_length);  // the most recent kept
    for (size_t k = first; k < ids.size(); ++k) {
      out.features.emplace_back(slot, ids[k]);
      if (layout_.weighted)
        out.weights.push_back(schema_[i].weights ? weights_[i][k] : 1.0f);
    }
  }
  return std::nullopt;
}

}  // namespace satrap
