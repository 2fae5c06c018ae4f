// A user's PyTorch dense network as a satrap dense model (model.type torchscript): the contract a
// TorchScript module meets, and the boundary to libtorch.
//
// The contract (checked at load by one dry forward on a small batch; README "Your model"):
//   forward(self, dense: Tensor, embeddings: Tensor) -> Tensor
//     dense       float32 [B, D]     the batch's dense features (D = data's dense features)
//     embeddings  float32 [B, S, E]  the pooled embeddings of the S slots, E = model.dim
//     returns     float32 [B] or [B, 1]: one logit per sample; [B, T] with T labels
//                 (data.labels), one logit per task
//   With unpooled sequences (data.features' pooling: none, models/data/sequence_source.hpp):
//   forward(self, dense: Tensor, embeddings: Tensor, sequences: List[Tensor], lengths: Tensor)
//     dense       float32 [B, D]       the data's dense features
//     embeddings  float32 [B, S, E]    the pooled features' embeddings
//     sequences   K x float32 [B, L_k, E]  each sequence's embeddings, oldest first, zeros past
//                 its length (L_k = the feature's max_length)
//     lengths     int64 [B, K]         each sequence's length
//   A CPU trainer with training.blas_threads > 1 splits each batch over that many replicas of the
//   module, each with libtorch at one thread (models/dense/batch_split.hpp); random ops (dropout)
//   then draw from libtorch's one global generator from several threads, so such steps are not
//   bit-reproducible (they are at one thread, the default for modules under 50k parameters).
//   Parameters are float32 (every nn.Module parameter; buffers are left to the module). The loss
//   is satrap's binary cross-entropy on the logits, as for the built-in models; dropout and other
//   train/eval differences follow module.train() / module.eval(), set by satrap.
//
// libtorch is loaded only when a job asks for a TorchScript model: libtorch's shared libraries
// (about 300) cost 0.5-1 s at the start of every process that links them, and every satrap
// process (nodes, tests, `satrap jobs`) would pay it. The code that includes libtorch's headers
// is the plugin libsatrap_torch.so (models/torch/), built when CMake finds Torch and opened here
// with dlopen from $SATRAP_TORCH_PLUGIN, or beside the running executable, or in ../lib of it.
// Threading: torchscript_plugin() is thread-safe (opened once); each model has one owner.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/dense/dense_model.hpp"
#include "models/result.hpp"

namespace satrap {

// The shapes a module is checked against and trained with.
struct torchscript_contract {
  int dense_features = 0;           // D
  int slots = 0;                    // S
  int dim = 0;                      // E
  int tasks = 1;                    // T (data.labels): logits [B] when 1, else [B, T]
  std::vector<float> task_weights;  // training.task_weights (empty: each task weighs 1)
  // Unpooled sequences' positions L_k (K of them). With any, `slots` counts the pooled slots and
  // then every position, `dense_features` the dense features and then K lengths, and forward
  // takes four arguments (see the contract above).
  std::vector<int> sequences;
};

// What the load check found.
struct torchscript_info {
  uint64_t params = 0;  // float32 parameters, in module.parameters() order
  int tensors = 0;      // parameter tensors
  int tasks = 1;        // logits per sample
  std::string torch;    // the libtorch version that read it
};

// The plugin's entry points (ABI between satrap and libsatrap_torch.so, both built together).
struct torchscript_plugin_api {
  int abi;                    // torchscript_plugin_abi
  const char* torch_version;  // libtorch's version, e.g. "1.13.1"
  // Loads `archive` (the bytes of a TorchScript file; `name` is its path, for messages) and checks
  // it against `contract` with a dry forward and backward on a small batch.
  result<torchscript_info> (*inspect)(const std::string& archive, const std::string& name,
                                      const torchscript_contract& contract);
  // A model whose parameters start as the archive's (every replica loads the same archive, so
  // every replica starts the same); `threads` is libtorch's intra-op thread count.
  result<std::unique_ptr<dense_model>> (*make)(std::shared_ptr<const std::string> archive,
                                               const torchscript_contract& contract, int threads,
                                               uint64_t seed);
  // Saves `archive` with its parameters replaced by `params` (the module as trained).
  result<std::string> (*with_params)(const std::string& archive, const float* params,
                                     uint64_t count);
};
inline constexpr int torchscript_plugin_abi = 3;

// The plugin, opened on first use; the error says where it was looked for and what to do.
result<const torchscript_plugin_api*> torchscript_plugin();

// TorchScript archives larger than this are refused: a job carries its module (base64) to every
// node inside its spec, which is one CAF message under the 512 MiB frame limit and is kept in the
// admin's job table. 64 MiB is 16M float parameters, more than the dense networks of DLRM-scale
// recommenders.
inline constexpr uint64_t torchscript_archive_bytes_max = uint64_t{64} << 20;

}  // namespace satrap
