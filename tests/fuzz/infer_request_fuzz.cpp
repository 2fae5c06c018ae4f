// libFuzzer target of the KServe v2 request parser (models/serving/infer_request.hpp): any bytes
// as a request body, JSON or with the binary extension, for a model whose shape the first bytes
// pick. Never a crash; a parsed request always has N in 1..max_instances, N x slots bags whose
// offsets ascend from 0 to the ids' count, N x dense_features finite floats and one or two
// distinct outputs; its response is valid JSON ahead of exactly the binary outputs' bytes; a
// refusal always says why, as a 400 or a 413.
// Layout of an input: byte 0 picks the slots (1-4), byte 1 the dense features (0-2), bytes 2-3
// the Inference-Header-Content-Length (little-endian; 0xffff or past the body: none), the rest is
// the body.
// Threading: libFuzzer calls it from one thread.
#include "models/serving/infer_request.hpp"

#include <nlohmann/json.hpp>

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
  if (size < 4)
    return 0;
  satrap::infer_model_io io;
  io.name = "m";
  io.version = "v";
  io.slots = 1 + data[0] % 4;
  io.dense_features = data[1] % 3;
  io.max_instances = 64;
  io.max_ids_per_bag = 64;
  size_t header = data[2] | (static_cast<size_t>(data[3]) << 8);
  std::string_view body(reinterpret_cast<const char*>(data) + 4, size - 4);
  if (header == 0xffff || header > body.size())
    header = std::string_view::npos;
  auto r = satrap::parse_infer_request(body, header, io);
  if (!r.error.empty()) {
    check(r.status == 400 || r.status == 413);
    return 0;
  }
  auto& in = r.input;
  const auto slots = static_cast<size_t>(io.slots);
  check(in.size >= 1 && static_cast<size_t>(in.size) <= io.max_instances);
  check(in.offsets.size() == static_cast<size_t>(in.size) * slots + 1);
  check(in.offsets.front() == 0 && in.offsets.back() == in.ids.size());
  for (size_t b = 1; b < in.offsets.size(); ++b)
    check(in.offsets[b] >= in.offsets[b - 1]
          && in.offsets[b] - in.offsets[b - 1] <= io.max_ids_per_bag);
  check(in.dense.size() == static_cast<size_t>(in.size) * static_cast<size_t>(io.dense_features));
  for (float f : in.dense)
    check(std::isfinite(f));
  check(!r.outputs.empty() && r.outputs.size() <= 2);
  if (r.outputs.size() == 2)
    check(r.outputs[0].what != r.outputs[1].what);
  std::vector<float> logits(static_cast<size_t>(in.size), 0.25f);
  size_t response_header = 0;
  auto res =
    satrap::infer_response(io, r.id, logits.data(), logits.size(), r.outputs, response_header);
  size_t binary = 0;
  for (auto& o : r.outputs)
    binary += o.binary ? logits.size() * 4 : 0;
  size_t json_part = response_header == std::string::npos ? res.size() : response_header;
  check(json_part + binary == res.size());
  check(!nlohmann::json::parse(res.begin(), res.begin() + static_cast<ptrdiff_t>(json_part),
                               nullptr, false)
           .is_discarded());
  return 0;
}
