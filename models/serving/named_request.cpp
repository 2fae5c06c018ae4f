// The request of a model with named features (predict_request.hpp): the body's instances are
// found by a bracket scan (strings and escapes skipped, no values built), and each instance's
// object text is parsed by the job's own JSON-lines parser, so a served instance becomes exactly
// the sample training read from the same line.
#include "models/data/jsonl_format.hpp"
#include "models/data/sample_builder.hpp"
#include "models/data/sequence_source.hpp"
#include "models/serving/predict_request.hpp"

#include <algorithm>

namespace satrap {

namespace {

bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

struct scanner {
  std::string_view s;
  size_t at = 0;

  void skip() {
    while (at < s.size() && space(s[at]))
      ++at;
  }
  bool eat(char c) {
    skip();
    if (at < s.size() && s[at] == c) {
      ++at;
      return true;
    }
    return false;
  }
  // A JSON string starting at `at` (its quote); false when unterminated.
  bool string(std::string_view* out = nullptr) {
    size_t start = ++at;
    while (at < s.size() && s[at] != '"')
      at += s[at] == '\\' ? 2 : 1;
    if (at >= s.size())
      return false;
    if (out)
      *out = s.substr(start, at - start);
    ++at;
    return true;
  }
  // The extent of the object starting at `at` ('{'): brackets balanced outside strings.
  bool object(std::string_view& out) {
    size_t start = at, depth = 0;
    while (at < s.size()) {
      char c = s[at];
      if (c == '"') {
        if (!string())
          return false;
        continue;
      }
      ++at;
      if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) {
          out = s.substr(start, at - start);
          return c == '}';
        }
      }
    }
    return false;
  }
};

const char* expected_body =
  "expected {\"instances\": [{\"<feature>\": <value>, ...}, ...]}: each instance a JSON object of "
  "the model's features by name, as a line of its JSON-lines data";

}  // namespace

predict_request_parse parse_named_predict_request(std::string_view body,
                                                  const exported_model& model,
                                                  const predict_request_limits& limits) {
  predict_request_parse r;
  auto fail = [&](std::string why) {
    predict_request_parse failed;
    failed.error = std::move(why);
    return failed;
  };
  const auto& layout = model.layout();
  text_format_options options;
  options.format = text_format::jsonl;
  options.features = model.meta().features;
  options.labels.clear();  // an instance's labels, if any, are keys that are no feature
  jsonl_parser parser(options);
  text_sample sample;

  batch b;  // the data's layout, expanded below as training expands it
  b.slots = layout.slots;
  b.dense_features = std::max(layout.dense, 1);
  b.offsets.push_back(0);
  sample_builder builder;
  builder.slots = layout.slots;
  builder.weighted = layout.weighted;

  scanner sc{body};
  if (!sc.eat('{'))
    return fail(std::string("malformed JSON: ") + expected_body);
  bool seen = false;
  for (bool first = true;; first = false) {
    if (sc.eat('}'))
      break;
    if (!first && !sc.eat(','))
      return fail(std::string("malformed JSON: ") + expected_body);
    sc.skip();
    std::string_view key;
    if (sc.at >= body.size() || body[sc.at] != '"' || !sc.string(&key) || !sc.eat(':'))
      return fail(std::string("malformed JSON: ") + expected_body);
    if (key != "instances")
      return fail("unexpected key \"" + std::string(key.substr(0, 64)) + "\": " + expected_body);
    if (seen)
      return fail("\"instances\" given twice");
    seen = true;
    if (!sc.eat('['))
      return fail("\"instances\": expected an array of objects");
    for (size_t n = 0;; ++n) {
      if (n == 0 && sc.eat(']'))
        break;
      if (n > 0) {
        if (sc.eat(']'))
          break;
        if (!sc.eat(','))
          return fail("\"instances\": expected ',' or ']' after instance " + std::to_string(n - 1));
      }
      if (n >= limits.max_instances)
        return fail("\"instances\": more than " + std::to_string(limits.max_instances)
                    + " instances (send them in several requests)");
      sc.skip();
      std::string_view text;
      if (sc.at >= body.size() || body[sc.at] != '{' || !sc.object(text))
        return fail("instance " + std::to_string(n) + ": expected a JSON object of the model's "
                    "features by name");
      if (auto e = parser.parse(text, sample))
        return fail("instance " + std::to_string(n) + " (byte " + std::to_string(e->column)
                    + "): " + e->reason + ": expected " + e->expected);
      builder.add(sample, b);  // as the binary cache lays it out
    }
  }
  sc.skip();
  if (sc.at != body.size())
    return fail(std::string("malformed JSON: text after the request's object; ") + expected_body);
  if (!seen)
    return fail("expected a JSON object with \"instances\"");
  if (b.size == 0)
    return fail("\"instances\": expected a non-empty array of instances");
  if (!layout.sequences.empty())
    b = expand_sequences(b, layout.sequences);
  r.input.size = b.size;
  r.input.offsets = std::move(b.offsets);
  r.input.ids = std::move(b.ids);
  r.input.weights = std::move(b.weights);
  r.input.dense = std::move(b.dense);
  return r;
}

}  // namespace satrap
