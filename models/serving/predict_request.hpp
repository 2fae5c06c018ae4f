// The JSON request and response of online serving (TF-Serving-like), parsed and checked at the
// edge, before anything is scored.
//
// Request:  {"instances": [{"dense": [f, ...], "slots": [[id, ...], ...]}, ...]}
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
};

// On success: error empty and `out` filled (size, offsets, ids, dense).
struct predict_request_parse {
  std::string error;  // "" on success
  score_input input;
};

predict_request_parse parse_predict_request(std::string_view body,
                                            const predict_request_limits& limits);

std::string predict_response_json(const std::string& model, const std::string& version,
                                  const float* logits, size_t n);

}  // namespace satrap
