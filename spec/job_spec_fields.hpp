// Inside the job spec (spec/job_spec.hpp), not for other code: the value parsers and printers
// that the key table's rows use, the row macros, and the sections of the table. Each section
// file holds its keys' rows (parse and print) and the checks of its keys taken together:
//   job_spec_model.cpp  model.*
//   job_spec_data.cpp   data.*
//   job_spec_run.cpp    training.*, metrics.*, placement.*, checkpoint.*, supervision.*, timing.*
// job_spec.cpp puts the table together (name first, then the sections in this order: the order
// of --print-spec and of the wire text) and loads, finalizes and prints a spec.
// Threading: pure functions.
#pragma once

#include "runtime/error.hpp"
#include "spec/job_spec.hpp"

#include <caf/error.hpp>

#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace satrap::job_spec_detail {

// The rows of each section, in table order.
std::vector<job_field> model_fields();
std::vector<job_field> data_fields();
std::vector<job_field> run_fields();

// The checks of each section's keys taken together (and what they derive), run in this order by
// job_spec_finalize: data (its file format follows data.source), then the network's shape from
// the data, then model, then run.
caf::error data_finalize(job_spec& spec);
caf::error model_finalize(job_spec& spec);
caf::error run_finalize(job_spec& spec);

// A spec that does not make sense: `what` names the key, what was expected and what it got.
inline caf::error bad_spec(const std::string& what) {
  return make_error(errc::invalid_config, what);
}

// ---- value parsers: "" on success, else what was expected -----------------------------------

template <class T>
std::string parse_int(const std::string& text, T& out, T lo, T hi) {
  T v{};
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size() || v < lo || v > hi)
    return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  out = v;
  return "";
}

template <class T>
std::string parse_real(const std::string& text, T& out, double lo, double hi) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::ostringstream want;
  want << "a number in [" << lo << ", " << hi << "]";
  if (text.empty() || end != text.c_str() + text.size() || !(v >= lo && v <= hi))
    return want.str();
  out = static_cast<T>(v);
  return "";
}

inline std::string parse_sizes(const std::string& text, std::vector<int>& out) {
  std::vector<int> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int x = 0;
    if (!parse_int(item, x, 1, 1 << 16).empty())
      return "a list of layer sizes in [1, 65536], e.g. [64, 32]";
    v.push_back(x);
  }
  out = std::move(v);
  return "";
}

inline std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty())
      v.push_back(item);
  return v;
}

// "[a,b]" (built with append: g++ 12 warns falsely on chains of operator+).
inline std::string show_list(const std::vector<std::string>& v, const char* separator = ",") {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s.append(i ? separator : "").append(v[i]);
  s.push_back(']');
  return s;
}

inline std::string parse_ids(const std::string& text, std::vector<int64_t>& out) {
  std::vector<int64_t> v;
  for (auto& item : split_list(text)) {
    int64_t x = 0;
    if (!parse_int(item, x, int64_t{0}, int64_t{1} << 62).empty())
      return "a list of feature ids in [0, 2^62], e.g. [0, 957, 5039]";
    v.push_back(x);
  }
  out = std::move(v);
  return "";
}

// A nested list's text, "[a,b],[c]" or "[[a,b],[c]]" (spaces ignored; "" or "[]": none), as its
// inner lists' items; false when the text is not of that form.
inline bool split_nested(const std::string& text, std::vector<std::vector<std::string>>& out) {
  std::string t;
  for (char c : text)
    if (c != ' ')
      t.push_back(c);
  out.clear();
  if (t.empty() || t == "[]")
    return true;
  if (t.size() >= 4 && t.compare(0, 2, "[[") == 0 && t.compare(t.size() - 2, 2, "]]") == 0)
    t = t.substr(1, t.size() - 2);
  for (size_t at = 0; at < t.size();) {
    auto end = t.find(']', at);
    if (t[at] != '[' || end == std::string::npos || t.find('[', at + 1) < end)
      return false;
    out.push_back(split_list(t.substr(at + 1, end - at - 1)));
    at = end + 1;
    if (at < t.size() && (t[at] != ',' || ++at == t.size()))
      return false;
  }
  return true;
}

// data.crosses: lists of slot numbers (their range is checked with the data, in data_finalize).
inline std::string parse_crosses(const std::string& text, feature_crosses& out) {
  const char* want =
    "a list of crosses, each a list of 2 or more sparse slots, e.g. [[0, 1], [1, 2]]";
  std::vector<std::vector<std::string>> items;
  if (!split_nested(text, items))
    return want;
  feature_crosses v;
  for (auto& cross : items) {
    v.emplace_back();
    for (auto& item : cross) {
      int x = 0;
      if (!parse_int(item, x, std::numeric_limits<int>::min(), std::numeric_limits<int>::max())
             .empty())
        return want;
      v.back().push_back(x);
    }
  }
  out = std::move(v);
  return "";
}

inline std::string show_crosses(const feature_crosses& v) {
  std::string s = "[";
  for (size_t c = 0; c < v.size(); ++c)
    s.append(c ? ", " : "").append(cross_text(v[c]));
  return s + "]";
}

// data.features: the flow YAML of a list of maps (job_field::yaml); "" or a whole message naming
// the feature (job_spec_data.cpp).
std::string parse_features(const std::string& text, feature_schema& out);

template <class E>
std::string parse_enum(const std::string& text, E& out,
                       std::initializer_list<std::pair<const char*, E>> choices) {
  std::string want = "one of";
  for (auto& [name, value] : choices) {
    if (text == name) {
      out = value;
      return "";
    }
    want += std::string(" ") + name;
  }
  return want;
}

template <class E>
std::string show_enum(E value, std::initializer_list<std::pair<const char*, E>> choices) {
  for (auto& [name, v] : choices)
    if (v == value)
      return name;
  return "?";
}

// training.task_weights: finite weights >= 0, e.g. [1, 0.5]; at least one above 0.
inline std::string parse_weights(const std::string& text, std::vector<float>& out) {
  std::vector<float> v;
  std::stringstream ss(text);
  std::string item;
  bool positive = false;
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ')
      item.erase(item.begin());
    char* end = nullptr;
    double x = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !(x >= 0.0 && x <= 1e6))
      return "a list of weights in [0, 1e6], one per label, e.g. [1, 0.5]";
    positive = positive || x > 0.0;
    v.push_back(static_cast<float>(x));
  }
  if (!v.empty() && !positive)
    return "at least one weight above 0";
  out = std::move(v);
  return "";
}

inline std::string show_weights(const std::vector<float>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i)
    os << (i ? "," : "") << v[i];
  return os.str();
}

inline std::string show_sizes(const std::vector<int>& v) {
  std::ostringstream os;  // (string concatenation here trips a false -Wstringop-overflow in g++ 12)
  for (size_t i = 0; i < v.size(); ++i)
    os << (i ? "," : "") << v[i];
  return os.str();
}

template <class T>
std::string show(T x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

#define SATRAP_INT_FIELD(KEY, FLAG, HELP, MEMBER, LO, HI)          \
  job_field {                                                      \
    KEY, FLAG, HELP,                                               \
      [](job_spec& s, const std::string& t) {                      \
        return parse_int<decltype(s.MEMBER)>(t, s.MEMBER, LO, HI); \
      },                                                           \
      [](const job_spec& s) { return std::to_string(s.MEMBER); }   \
  }
#define SATRAP_REAL_FIELD(KEY, FLAG, HELP, MEMBER, LO, HI)                               \
  job_field {                                                                            \
    KEY, FLAG, HELP,                                                                     \
      [](job_spec& s, const std::string& t) { return parse_real(t, s.MEMBER, LO, HI); }, \
      [](const job_spec& s) { return show(s.MEMBER); }                                   \
  }
#define SATRAP_ENUM_FIELD(KEY, FLAG, HELP, MEMBER, ...)                                         \
  job_field {                                                                                   \
    KEY, FLAG, HELP,                                                                            \
      [](job_spec& s, const std::string& t) { return parse_enum(t, s.MEMBER, {__VA_ARGS__}); }, \
      [](const job_spec& s) { return show_enum(s.MEMBER, {__VA_ARGS__}); }                      \
  }
#define SATRAP_STRING_FIELD(KEY, FLAG, HELP, MEMBER) \
  job_field {                                        \
    KEY, FLAG, HELP,                                 \
      [](job_spec& s, const std::string& t) {        \
        s.MEMBER = t;                                \
        return std::string{};                        \
      },                                             \
      [](const job_spec& s) { return s.MEMBER; }     \
  }
#define SATRAP_LIST_FIELD(KEY, FLAG, HELP, MEMBER)                \
  job_field {                                                     \
    KEY, FLAG, HELP,                                              \
      [](job_spec& s, const std::string& t) {                     \
        s.MEMBER = split_list(t);                                 \
        return std::string{};                                     \
      },                                                          \
      [](const job_spec& s) { return show_list(s.MEMBER); }, true \
  }
#define SATRAP_SIZES_FIELD(KEY, FLAG, HELP, MEMBER)                                              \
  job_field {                                                                                    \
    KEY, FLAG, HELP, [](job_spec& s, const std::string& t) { return parse_sizes(t, s.MEMBER); }, \
      [](const job_spec& s) { return show_sizes(s.MEMBER); }, true                               \
  }

using dok = dense_optimizer_kind;
using sok = sparse_optimizer_kind;
using lsk = lr_schedule_kind;
inline constexpr int32_t i32max = std::numeric_limits<int32_t>::max();
inline constexpr int64_t i64max = std::numeric_limits<int64_t>::max();
inline constexpr uint64_t u64max = std::numeric_limits<uint64_t>::max();

}  // namespace satrap::job_spec_detail
