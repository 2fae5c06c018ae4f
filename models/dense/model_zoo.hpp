// The dense model zoo: one config for every dense network a job can train (DLRM, DCN-v2, DeepFM,
// Wide&Deep), the factory that builds one and its parameter count (used by the planner).
// Threading: plain values and pure functions; each model made is not thread-safe, one owner.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/dense/dense_model.hpp"
#include "models/result.hpp"

namespace satrap {

// torchscript: the user's PyTorch module (models/dense/torchscript.hpp), loaded from model.file.
enum class dense_model_type { dlrm, dcn_v2, deepfm, wide_deep, torchscript };

// DLRM's interaction: dot = [x, pairwise dots]; cat = [x, e_1..e_slots] (no dots); dot_cat =
// [x, pairwise dots, e_1..e_slots] (the raw field embeddings beside the dots).
enum class dlrm_interaction { dot, cat, dot_cat };

// The dense network's GEMM precision. fp32 everywhere on the CPU; on the GPU bf16 / fp16 GEMM
// inputs (fp32 accumulation, fp32 master weights and optimizer state; fp16 with dynamic loss
// scaling). The CPU models compute in fp32 only: a job asking otherwise is refused.
enum class dense_precision { fp32, bf16, fp16 };
const char* dense_precision_name(dense_precision p);  // "fp32", "bf16", "fp16"

// Shape of a dense network. Every model has the bottom tower (dense features -> dim, like an
// embedding) and a deep MLP over its own input whose last layer outputs the one logit.
struct dense_model_config {
  dense_model_type type = dense_model_type::dlrm;
  int dense_features = 13;  // dense inputs per sample
  int slots = 8;            // pooled embeddings per sample
  int dim = 16;             // embedding size (= bottom MLP output size)
  std::vector<int> bottom = {
    32};  // hidden sizes of the bottom MLP; a last layer outputs `dim` (no activation after it)
  std::vector<int> top = {64,
                          32};  // hidden sizes of the top / deep MLP; a last layer outputs 1 logit
  int cross_layers = 3;         // DCN-v2: full-rank cross layers before the deep MLP
  dlrm_interaction interaction = dlrm_interaction::dot;  // DLRM: what the top MLP sees
  float dropout = 0.0f;  // DLRM: dropout on the top MLP's hidden layers while training
  dense_precision precision = dense_precision::fp32;  // GEMM inputs (GPU only; see above)
  // Tasks (data.labels): the top MLP's last layer outputs one logit per task (a shared-bottom
  // multi-task network; DLRM, DCN-v2 and torchscript modules). task_weights: each task's loss
  // weight (training.task_weights; empty: every task weighs 1).
  int tasks = 1;
  std::vector<float> task_weights;
  // Unpooled sequences (data.features' pooling: none; models/data/sequence_source.hpp): each
  // one's positions. `slots` counts the pooled slots and then every position, `dense_features`
  // the data's dense features and then one length per sequence. Only torchscript takes them.
  std::vector<int> sequences;
  // torchscript: the archive's bytes (read once with the job; shared, never copied), where they
  // came from (messages), and its parameter count from the load check.
  std::shared_ptr<const std::string> torchscript;
  std::string torchscript_file;
  uint64_t torchscript_params = 0;
};

// The DLRM top MLP's input size for this config.
int dlrm_top_input(const dense_model_config& config);

// "" when the model type supports config.tasks tasks, else why not (deepfm and wide_deep add a
// one-logit term of their own: one task only).
std::string dense_model_tasks_error(const dense_model_config& config);

// "dlrm", "dcn_v2", "deepfm", "wide_deep", "torchscript".
const char* dense_model_type_name(dense_model_type type);

// Parameters start like PyTorch's nn.Linear (uniform +-1/sqrt(fan_in)), deterministic in seed
// (torchscript: as the archive's). A torchscript config whose module cannot be made (checked when
// the job was read) is a failed assertion here; make_dense_model_checked says why instead.
// The flat parameter vector is the bottom MLP first, then the model's own parts (see each maker);
// every linear layer is W (out x in, row-major) then b.
std::unique_ptr<dense_model> make_dense_model(const dense_model_config& config, uint64_t seed);

result<std::unique_ptr<dense_model>> make_dense_model_checked(const dense_model_config& config,
                                                              uint64_t seed, int threads = 1);

// make_dense_model(config, s)->params().size(), without building the model.
uint64_t dense_model_param_count(const dense_model_config& config);

// DLRM: bottom MLP, pairwise-dot interaction of [bottom(dense), e_1..e_slots], top MLP.
// Params: bottom, top.
std::unique_ptr<dense_model> make_dlrm(const dense_model_config& config, uint64_t seed);
// DCN-v2 (stacked): x0 = [bottom(dense), e_1..e_slots] of size (slots+1)*dim; cross layers
// x_{l+1} = x0 * (W_l x_l + b_l) + x_l (element-wise *, full-rank W_l); then the top MLP on x_L.
// Params: bottom, cross layers (W_l, b_l each), top.
std::unique_ptr<dense_model> make_dcn_v2(const dense_model_config& config, uint64_t seed);
// DeepFM: fields [bottom(dense), e_1..e_slots]; logit = FM second-order term
// 0.5 * sum_k((sum_i v_ik)^2 - sum_i v_ik^2) + a linear layer (first order) over the concatenated
// fields + the top MLP over them. Params: bottom, first-order linear, top.
std::unique_ptr<dense_model> make_deepfm(const dense_model_config& config, uint64_t seed);
// Wide&Deep: logit = wide + deep; wide = a linear layer over [dense, e_1..e_slots] (raw dense
// features; per-id weights live in the embedding store, so the wide part sees pooled embeddings);
// deep = the top MLP over [bottom(dense), e_1..e_slots]. Params: bottom, wide linear, top.
std::unique_ptr<dense_model> make_wide_deep(const dense_model_config& config, uint64_t seed);

}  // namespace satrap
