// libFuzzer target of the serving request parser (models/serving/predict_request.hpp): any bytes
// as a request body for a model whose shape the first two bytes pick (the second's high bit: a
// model of weighted ids). Never a crash; a parsed request always has exactly `slots` bags and
// `dense_features` finite floats per instance, bag offsets ascending and covering every id, one
// finite weight per id for a weighted model (none otherwise), and at most max_instances
// instances; a refusal always says why.
// Threading: libFuzzer calls it from one thread.
#include "models/serving/predict_request.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

void check(bool ok) {
  if (!ok)
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  satrap::predict_request_limits limits;
  limits.slots = 1 + (input.empty() ? 2 : static_cast<uint8_t>(input[0]) % 4);
  limits.dense_features = input.size() < 2 ? 1 : static_cast<uint8_t>(input[1]) % 3;
  limits.weights = input.size() >= 2 && (static_cast<uint8_t>(input[1]) & 0x80) != 0;
  limits.max_instances = 64;
  limits.max_ids_per_bag = 64;
  input.remove_prefix(std::min<size_t>(2, input.size()));
  auto r = satrap::parse_predict_request(input, limits);
  if (!r.error.empty())
    return 0;
  auto& in = r.input;
  check(in.size >= 1 && static_cast<size_t>(in.size) <= limits.max_instances);
  check(in.offsets.size() == static_cast<size_t>(in.size) * limits.slots + 1);
  check(in.offsets.front() == 0 && in.offsets.back() == in.ids.size());
  for (size_t b = 1; b < in.offsets.size(); ++b)
    check(in.offsets[b] >= in.offsets[b - 1]
          && in.offsets[b] - in.offsets[b - 1] <= limits.max_ids_per_bag);
  check(in.dense.size() == static_cast<size_t>(in.size) * limits.dense_features);
  for (float f : in.dense)
    check(std::isfinite(f));
  check(limits.weights ? in.weights.size() == in.ids.size() : in.weights.empty());
  for (float w : in.weights)
    check(std::isfinite(w));
  return 0;
}
