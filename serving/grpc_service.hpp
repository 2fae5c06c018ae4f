// KServe v2 / Open Inference Protocol over gRPC for the model server (`satrap serve --grpc-port`):
// `inference.GRPCInferenceService` (serving/proto/grpc_predict_v2.proto) with ServerLive,
// ServerReady, ServerMetadata, ModelReady, ModelMetadata and ModelInfer, on its own port beside
// the HTTP one. Built only where CMake finds gRPC (libgrpc++-dev, protobuf-compiler-grpc): without
// it model_server::start refuses a gRPC port (grpc_built() is false).
//
// ModelInfer is the HTTP v2 route's infer (serving/model_server_v2.cpp) with protobuf tensors:
// the same inputs (`dense` FP32 [N, D]; `ids` INT64/UINT64 [N, S], or [T] with `ids_lengths`
// INT32/INT64 [N, S]), given as typed contents (fp32_contents, int64_contents, uint64_contents,
// int_contents) or as raw_input_contents (one little-endian blob per input, in the inputs'
// order); the same checks, limits and error texts (the request goes through
// parse_infer_request as a binary-extension body); batched with the HTTP requests of its version
// (model_server::impl::score_request) and answered wholly by the version it pinned. Outputs
// `predictions` and `logits` FP32 [N] (both unless the request names some), as raw_output_contents
// when the inputs came raw, else as contents.fp32_contents.
// Errors: INVALID_ARGUMENT with the HTTP route's 400/413 text (naming the input), NOT_FOUND for
// an unknown model or version, UNAVAILABLE while stopping; a message past the server's body limit
// (--max-body-mb) is refused by gRPC itself (RESOURCE_EXHAUSTED). Plaintext (no TLS), as the HTTP
// port. Threading: gRPC's synchronous server; a ModelInfer call waits on its handler thread for
// its batch, as an HTTP request does.
#pragma once

#include <cstdint>

namespace satrap {

// A running gRPC endpoint of the model server.
class grpc_endpoint {
 public:
  virtual ~grpc_endpoint() = default;
  // Stops taking calls and waits (at most the server's read timeout) for those in flight.
  virtual void stop() = 0;
  virtual uint16_t port() const = 0;
};

// Whether this build has the gRPC service.
bool grpc_built();

}  // namespace satrap
