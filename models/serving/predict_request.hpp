// The JSON request and response of online serving (TF-Serving-like), parsed and checked at the
// edge, before anything is scored.
//
// Request:  {"instances": [{"dense": [f, ...], "slots": [[id, ...], ...]}, ...]}
//           (a model of weighted ids, data.value_weights, takes "weights": [[w, ...], ...] too:
//           one finite number per id, shaped as "slots")
//   dense   exactly the model's dense features (numbers)
//   slots   exactly the model's slots, each a bag (array) of ids as the data readers produce them:
//           64-bit ids already hashed into the slot's id space, as JSON integers 0..2^64-1 or as
//           decimal strings (for clients whose numbers are doubles). An empty bag pools to zeros
//           (the readers give a missing value its slot's missing id instead).
// Response: {"model": name, "version": v, "predictions": [p, ...], "logits": [l, ...]}
// Errors name the instance, the field and what was expected.
// Parsed streaming (nlohmann's SAX interface): each value is checked as it comes and stored in
// the scorer's input (no DOM), and the first bad value ends the parse; the instance count is
// refused at max_instances + 1, a bag at max_ids_per_bag + 1 ids.
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/serving/exported_model.hpp"

namespace satrap {

struct predict_request_limits {
  int slots = 0;                // the model's
  int dense_features = 0;       // the model's
  size_t max_instances = 4096;  // per request
  size_t max_ids_per_bag = 65536;
  bool weights = false;  // the model's (exported_model::value_weights): "weights" required
};

// On success: error empty and `out` filled (size, offsets, ids, dense).
struct predict_request_parse {
  std::string error;  // "" on success
  score_input input;
};

predict_request_parse parse_predict_request(std::string_view body,
                                            const predict_request_limits& limits);

// A model with named features (exported_model::named; models/serving/named_request.cpp):
//   {"instances": [{"user": 17, "item": "sku-42", "tags": [3, 9], "price": 12.5}, ...]}
// each instance a sample as a line of the job's JSON lines gives it (models/data/jsonl_format.hpp:
// ids as integers or strings, bags and sequences as arrays (oldest first), weighted features as
// {"ids": [...], "weights": [...]}, dense features as numbers; every feature of the model, by
// name; labels and other keys ignored, so a line of the training data is an instance as it is).
// Its ids are hashed by table, its sequences cut and expanded, as training saw them. Errors name
// the instance, the byte in it, the reason and the feature. limits.slots and dense_features are
// not used (the model's features say them).
predict_request_parse parse_named_predict_request(std::string_view body,
                                                  const exported_model& model,
                                                  const predict_request_limits& limits);

// `n` logits, one per instance; with several labels (labels.size() > 1) `n` is instances x
// labels, sample-major, and each prediction is an object by label: {"click": p, "purchase": q}.
std::string predict_response_json(const std::string& model, const std::string& version,
                                  const float* logits, size_t n,
                                  const std::vector<std::string>& labels = {});

}  // namespace satrap
