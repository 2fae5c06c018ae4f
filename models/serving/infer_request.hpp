// The KServe v2 / Open Inference Protocol request and response of online serving (HTTP: JSON
// tensors and the binary tensor data extension), parsed and checked at the edge, before anything
// is scored. The HTTP routes are serving/model_server_v2.cpp's.
//
// A model's tensors, from its features (infer_model_io; GET /v2/models/<name> lists them):
//   inputs   "dense"        FP32 [N, D]   the dense features (only when the model has some)
//            "ids"          INT64 [N, S]  one id per slot, the data's S slots (the server adds the
//                                         feature crosses). UINT64 is taken too; an INT64 value is
//                                         the id's bit pattern (two's complement: numpy's
//                                         ids.view(np.int64)), so every 64-bit id can be sent.
//            "ids_lengths"  INT32 or INT64 [N, S], optional: bags. With it "ids" is [T], the bags'
//                                         ids one after another (instance-major, then slot),
//                                         T the lengths' sum; a bag of 0 ids pools to zeros.
//   outputs  "predictions"  FP32 [N]      click probabilities
//            "logits"       FP32 [N]
// Request (JSON): {"id"?, "parameters"?, "inputs": [{"name", "shape", "datatype", "parameters"?,
//   "data"?}], "outputs"?: [{"name", "parameters"?}]}. Data is row-major, flat or nested. With the
//   binary extension the body is `header_length` bytes of that JSON, then each input with
//   parameters.binary_data_size has that many bytes of raw little-endian data, in the inputs'
//   order. Known parameters: binary_data_size (input), binary_data (output), binary_data_output
//   (request: every output binary); other parameters are taken and ignored, as the protocol lets
//   clients add their own; any other unknown key is an error.
// Limits (checked before allocating): the body's size (the HTTP server's cap), JSON depth,
// nesting of data, values per input at most its shape's product once the shape is known, at
// most max_instances rows. Errors name the input, its shape and what was expected; `status` is the
// HTTP status to answer with (400; 413 when a size is past a limit).
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/serving/exported_model.hpp"

namespace satrap {

// The tensors a model takes and gives (see above).
struct infer_model_io {
  std::string name, version;
  int slots = 0;           // the data's slots (exported_model::input_slots)
  int dense_features = 0;  // 0: no "dense" input
  size_t max_instances = 4096;
  size_t max_ids_per_bag = 65536;
};

enum class infer_output : uint8_t { predictions, logits };

struct infer_output_request {
  infer_output what = infer_output::predictions;
  bool binary = false;
};

// On success: error empty, `input` filled (size, offsets, ids, dense), `outputs` the outputs to
// answer with (both, JSON, when the request names none).
struct infer_request_parse {
  int status = 200;
  std::string error;  // "" on success
  score_input input;
  std::string id;  // the request's "id", echoed in the response
  std::vector<infer_output_request> outputs;
};

// `body`: the whole HTTP body; `header_length`: Inference-Header-Content-Length, or npos when the
// request has none (then the body is JSON only).
infer_request_parse parse_infer_request(std::string_view body, size_t header_length,
                                        const infer_model_io& io);

// The response body; `header_length` is set to the JSON part's length when an output is binary
// (send it as Inference-Header-Content-Length), else to npos.
std::string infer_response(const infer_model_io& io, const std::string& id, const float* logits,
                           size_t n, const std::vector<infer_output_request>& outputs,
                           size_t& header_length);

// GET /v2/models/<name>: name, versions, platform, inputs and outputs.
std::string infer_model_metadata(const infer_model_io& io);

// The value of Inference-Header-Content-Length: the length, or npos with `error` and `status` set
// (400 when it is not a number or is past the body, 413 when it is past `max_body`).
size_t parse_header_length(const std::string& value, size_t body_size, size_t max_body,
                           std::string& error, int& status);

// `s` as a JSON string (quoted; '"', '\\' and control bytes escaped) appended to `out`.
void append_escaped(std::string& out, std::string_view s);

}  // namespace satrap
