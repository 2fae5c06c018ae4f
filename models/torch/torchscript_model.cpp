// libsatrap_torch.so: the one translation unit that includes libtorch. A TorchScript module as a
// satrap dense_model (the contract is in models/dense/torchscript.hpp).
//
// The module's parameters live in one flat float buffer of the model (each parameter tensor made
// a view of its slice with set_data), so the ring all-reduce, the dense optimizers, checkpoints
// and the best model work on it as on the built-in models; gradients are copied into the flat
// gradient buffer after each backward. The loss (binary cross-entropy on the logits) is computed
// here in plain C++ with the built-in models' formula; its gradient is fed to autograd.
#include <ATen/Parallel.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <caffe2/serialize/versions.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "models/dense/torchscript.hpp"

#ifndef SATRAP_TORCH_VERSION
#define SATRAP_TORCH_VERSION "unknown"
#endif

namespace satrap {
namespace {

std::string shape_of(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i)
    s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

// torch's message without the C++ backtrace it appends.
std::string torch_message(const std::exception& e) {
  if (auto* c = dynamic_cast<const c10::Error*>(&e))
    return c->what_without_backtrace();
  return e.what();
}

// A reader over bytes in memory, for the archive's version record.
class bytes_reader final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit bytes_reader(const std::string& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= bytes_.size())
      return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::string& bytes_;
};

// The module of `archive`, or why it cannot be read: not an archive, or from a newer torch.
result<torch::jit::Module> load_module(const std::string& archive, const std::string& name) {
  uint64_t version = 0;
  try {
    caffe2::serialize::PyTorchStreamReader reader(std::make_unique<bytes_reader>(archive));
    version = reader.version();
  } catch (const std::exception& e) {
    // A newer file format than this libtorch reads fails here too; say both versions.
    std::string msg = torch_message(e);
    if (auto at = msg.find("Attempted to read a PyTorch file with version");
        at != std::string::npos) {
      // "[enforce fail at ...] . Attempted to read ... version N, but the maximum supported
      // version for reading is M. The version of your PyTorch installation may be too old..."
      auto end = msg.find(". ", at);
      return make_input_error(name + ": made by a newer torch than this satrap's libtorch "
                              + SATRAP_TORCH_VERSION + " reads ("
                              + msg.substr(at, end == std::string::npos ? end : end - at)
                              + "); script the module with torch " + SATRAP_TORCH_VERSION
                              + ", or build satrap against a newer libtorch (-DTorch_DIR=...)");
    }
    return make_input_error(name + ": not a TorchScript archive (" + msg
                            + "); make one with torch.jit.script(module).save(path)");
  }
  if (version > caffe2::serialize::kMaxSupportedFileFormatVersion)
    return make_input_error(
      name + ": a TorchScript archive of file format " + std::to_string(version)
      + ", made by a newer torch; this satrap's libtorch " + SATRAP_TORCH_VERSION
      + " reads formats up to " + std::to_string(caffe2::serialize::kMaxSupportedFileFormatVersion)
      + ": script the module with torch " + SATRAP_TORCH_VERSION
      + " or build satrap against a newer libtorch (-DTorch_DIR=...)");
  try {
    std::istringstream in(archive);
    return torch::jit::load(in, c10::Device(c10::kCPU));
  } catch (const std::exception& e) {
    return make_input_error(name + ": libtorch " + SATRAP_TORCH_VERSION
                            + " could not load this TorchScript archive (file format "
                            + std::to_string(version) + "): " + torch_message(e));
  }
}

// binary cross-entropy with logits, the built-in models' formula (models/dense/bce.cpp):
// loss_i = max(z,0) - z*y + log1p(exp(-|z|)); dlogits_i = (sigmoid(z_i) - y_i) * scale.
// Several tasks: batch x tasks, row-major, task t's loss and gradient times task_weights[t].
double bce(int n, int tasks, const std::vector<float>& task_weights, const float* logits,
           const float* labels, float scale, float* dlogits) {
  double sum = 0.0;
  for (int i = 0; i < n * tasks; ++i) {
    float w = task_weights.empty() ? 1.0f : task_weights[static_cast<size_t>(i % tasks)];
    float z = logits[i], y = labels[i];
    sum += w * (std::max(z, 0.0f) - z * y + std::log1p(std::exp(-std::fabs(z))));
    float p = z >= 0 ? 1.0f / (1.0f + std::exp(-z)) : std::exp(z) / (1.0f + std::exp(z));
    dlogits[i] = (p - y) * scale * w;
  }
  return sum;
}

// The contract's split of the model's dense [B, D + K] and embeddings [B, S + sum L, E]: K
// sequences, D dense features, S pooled slots.
struct contract_split {
  int64_t k = 0, d = 0, s = 0;
};
contract_split split_of(const torchscript_contract& c) {
  int64_t positions = 0;
  for (int l : c.sequences)
    positions += l;
  const auto k = static_cast<int64_t>(c.sequences.size());
  return {k, c.dense_features - k, c.slots - positions};
}

// The sequences' shapes for messages, "[N, L, E], ..." (N: the batch as written, "B" or "3").
std::string sequence_shapes(const torchscript_contract& c, const char* n) {
  std::string out;
  for (int l : c.sequences)
    out += (out.empty() ? "" : ", ") + std::string("[") + n + ", " + std::to_string(l) + ", "
           + std::to_string(c.dim) + "]";
  return out;
}

// forward's arguments from the model's whole dense and embeddings (views, no copies): (dense,
// embeddings), or with unpooled sequences (dense [B, D], embeddings [B, S, E], sequences K x
// [B, L_k, E], lengths [B, K] int64). A gradient of the views reaches the whole embeddings tensor.
std::vector<c10::IValue> arguments(const torchscript_contract& c, const at::Tensor& dense,
                                   const at::Tensor& embeddings) {
  if (c.sequences.empty())
    return {dense, embeddings};
  const auto [k, d, s] = split_of(c);
  c10::List<at::Tensor> seqs;
  int64_t at = s;
  for (int l : c.sequences) {
    seqs.push_back(embeddings.narrow(1, at, l));
    at += l;
  }
  return {dense.narrow(1, 0, d), embeddings.narrow(1, 0, s), seqs,
          dense.narrow(1, d, k).to(torch::kInt64)};
}

// The dry run's inputs, as text for messages: "dense [3, D], embeddings [3, S, E]" and, with
// sequences, ", sequences [[3, L, E], ...], lengths [3, K]".
std::string dry_shapes(const torchscript_contract& c) {
  const auto [k, d, s] = split_of(c);
  std::string out = "dense [3, " + std::to_string(d) + "], embeddings [3, " + std::to_string(s)
                    + ", " + std::to_string(c.dim) + "]";
  if (k > 0)
    out += ", sequences [" + sequence_shapes(c, "3") + "], lengths [3, " + std::to_string(k) + "]";
  return out;
}

// The contract's forward, as text for messages.
std::string contract_text(const torchscript_contract& c) {
  const auto [k, d, s] = split_of(c);
  std::string out = "forward(self, dense: Tensor [B, " + std::to_string(d)
                    + "], embeddings: Tensor [B, " + std::to_string(s) + ", "
                    + std::to_string(c.dim) + "]";
  if (k > 0)
    out += ", sequences: List[Tensor] (" + sequence_shapes(c, "B") + "), lengths: Tensor int64 [B, "
           + std::to_string(k) + "]";
  return out + ") -> Tensor "
         + (c.tasks == 1 ? std::string("[B]") : "[B, " + std::to_string(c.tasks) + "]");
}

class torchscript_model final : public dense_model {
 public:
  torchscript_model(torch::jit::Module module, const torchscript_contract& c)
      : module_(std::move(module)), c_(c) {
    torch::NoGradGuard no_grad;
    size_t total = 0;
    for (const auto& p : module_.parameters())
      total += static_cast<size_t>(p.numel());
    flat_.resize(total);
    grad_.assign(total, 0.0f);
    size_t off = 0;
    for (auto p : module_.parameters()) {
      auto n = static_cast<size_t>(p.numel());
      auto src = p.detach().contiguous();
      std::memcpy(flat_.data() + off, src.data_ptr<float>(), n * sizeof(float));
      p.set_data(torch::from_blob(flat_.data() + off, p.sizes(), torch::kFloat32));
      params_.push_back(p);
      off += n;
    }
  }

  std::span<float> params() override { return flat_; }
  std::span<const float> params() const override { return flat_; }
  std::span<float> grads() override { return grad_; }

  double forward_backward(int batch, const float* dense, const float* pooled, const float* labels,
                          float loss_scale, float* logits, float* pooled_grad) override {
    set_training(true);
    torch::AutoGradMode grad_mode(true);
    auto d = torch::from_blob(const_cast<float*>(dense), {batch, c_.dense_features});
    auto e = torch::from_blob(const_cast<float*>(pooled), {batch, c_.slots, c_.dim})
               .detach()
               .requires_grad_(true);
    const int64_t n = static_cast<int64_t>(batch) * c_.tasks;
    auto out = module_.forward(arguments(c_, d, e)).toTensor().reshape({n});
    auto z = out.detach().contiguous();
    std::memcpy(logits, z.data_ptr<float>(), static_cast<size_t>(n) * sizeof(float));
    dlogits_.resize(static_cast<size_t>(n));
    double loss =
      bce(batch, c_.tasks, c_.task_weights, logits, labels, loss_scale, dlogits_.data());
    std::vector<at::Tensor> inputs(params_.begin(), params_.end());
    inputs.push_back(e);
    auto g = torch::autograd::grad({out}, inputs, {torch::from_blob(dlogits_.data(), {n})},
                                   /*retain_graph=*/false, /*create_graph=*/false,
                                   /*allow_unused=*/true);
    size_t off = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      auto n = static_cast<size_t>(params_[i].numel());
      copy_or_zero(g[i], grad_.data() + off, n);
      off += n;
    }
    copy_or_zero(g.back(), pooled_grad, static_cast<size_t>(batch) * c_.slots * c_.dim);
    return loss;
  }

  void forward(int batch, const float* dense, const float* pooled, float* logits) override {
    set_training(false);
    torch::NoGradGuard no_grad;
    auto d = torch::from_blob(const_cast<float*>(dense), {batch, c_.dense_features});
    auto e = torch::from_blob(const_cast<float*>(pooled), {batch, c_.slots, c_.dim});
    const int64_t n = static_cast<int64_t>(batch) * c_.tasks;
    auto z = module_.forward(arguments(c_, d, e)).toTensor().reshape({n}).contiguous();
    std::memcpy(logits, z.data_ptr<float>(), static_cast<size_t>(n) * sizeof(float));
  }

 private:
  void set_training(bool on) {
    if (training_ != on) {
      module_.train(on);
      training_ = on;
    }
  }
  static void copy_or_zero(const at::Tensor& g, float* out, size_t n) {
    if (!g.defined()) {
      std::fill(out, out + n, 0.0f);
      return;
    }
    auto c = g.contiguous();
    std::memcpy(out, c.data_ptr<float>(), n * sizeof(float));
  }

  torch::jit::Module module_;
  torchscript_contract c_;
  std::vector<float> flat_, grad_, dlogits_;
  std::vector<at::Tensor> params_;
  int training_ = -1;
};

// The contract's checks, each error naming the argument and the shapes got and expected.
result<torchscript_info> check(torch::jit::Module& m, const std::string& name,
                               const torchscript_contract& c) {
  auto method = m.find_method("forward");
  if (!method)
    return make_input_error(name + ": the module has no forward method");
  const auto& args = method->function().getSchema().arguments();  // self first
  const std::string expected = contract_text(c);
  const size_t want_args = c.sequences.empty() ? 2 : 4;
  if (args.size() != want_args + 1) {
    std::string got;
    for (size_t i = 1; i < args.size(); ++i)
      got += (i > 1 ? ", " : "") + args[i].name() + ": " + args[i].type()->str();
    return make_input_error(name + ": forward takes " + std::to_string(args.size() - 1)
                            + " argument(s) (" + got + "); expected " + std::to_string(want_args)
                            + ": " + expected
                            + (c.sequences.empty() ? ""
                                                   : " (the job has unpooled sequences: "
                                                     "data.features' pooling: none)"));
  }
  for (size_t i = 1; i <= want_args; ++i) {
    const bool list = i == 3;
    c10::TypePtr type =
      list ? c10::TypePtr(c10::ListType::ofTensors()) : c10::TypePtr(c10::TensorType::get());
    if (!args[i].type()->isSubtypeOf(*type))
      return make_input_error(name + ": forward's argument '" + args[i].name() + "' is "
                              + args[i].type()->str() + "; expected "
                              + (list ? "List[Tensor]" : "Tensor") + ": " + expected);
  }
  torchscript_info info;
  info.torch = SATRAP_TORCH_VERSION;
  for (const auto& p : m.named_parameters()) {
    if (p.value.scalar_type() != torch::kFloat32)
      return make_input_error(
        name + ": parameter '" + p.name + "' is "
        + std::string(c10::toString(p.value.scalar_type()))
        + "; expected float32 (call .float() on the module before scripting)");
    info.params += static_cast<uint64_t>(p.value.numel());
    ++info.tensors;
  }
  // One dry forward and backward on a small batch.
  const int64_t b = 3;
  auto d = torch::linspace(-1.0, 1.0, b * c.dense_features).reshape({b, c.dense_features});
  if (!c.sequences.empty()) {  // lengths 1, 2, 3, ... cut to each sequence's positions
    const int64_t k = static_cast<int64_t>(c.sequences.size());
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < k; ++j)
        d[i][c.dense_features - k + j] = std::min<int64_t>(i + 1, c.sequences[j]);
  }
  auto e = torch::linspace(-0.5, 0.5, b * c.slots * c.dim)
             .reshape({b, c.slots, c.dim})
             .requires_grad_(true);
  c10::IValue out;
  m.train(true);
  try {
    out = m.forward(arguments(c, d, e));
  } catch (const std::exception& ex) {
    return make_input_error(name + ": forward failed on " + dry_shapes(c) + ": " + torch_message(ex)
                            + "; expected " + expected);
  }
  if (!out.isTensor())
    return make_input_error(name + ": forward returned " + out.tagKind()
                            + "; expected a Tensor of logits [B] (" + expected + ")");
  auto t = out.toTensor();
  if (t.scalar_type() != torch::kFloat32)
    return make_input_error(name + ": forward returned a "
                            + std::string(c10::toString(t.scalar_type()))
                            + " tensor; expected float32 logits");
  const int64_t T = c.tasks;
  bool fits = (T == 1 && t.dim() == 1 && t.size(0) == b)
              || (t.dim() == 2 && t.size(0) == b && t.size(1) == T);
  const std::string want = T == 1 ? "[3] or [3, 1]" : "[3, " + std::to_string(T) + "]";
  if (!fits && t.dim() == 2 && t.size(0) == b)
    return make_input_error(name + ": forward returned " + shape_of(t) + " for a batch of 3: "
                            + std::to_string(t.size(1)) + " task(s), and this job has "
                            + std::to_string(T) + " label(s) (data.labels); expected " + want);
  if (!fits)
    return make_input_error(name + ": forward returned " + shape_of(t) + " for " + dry_shapes(c)
                            + "; expected logits " + want);
  if (!t.requires_grad())
    return make_input_error(name + ": forward's output does not depend on any parameter or on "
                            "the embeddings (no gradient would flow); expected logits computed "
                            "from the inputs");
  info.tasks = c.tasks;
  return info;
}

result<torchscript_info> inspect(const std::string& archive, const std::string& name,
                                 const torchscript_contract& c) {
  auto m = load_module(archive, name);
  if (!m)
    return m.failure();
  try {
    return check(*m, name, c);
  } catch (const std::exception& e) {
    return make_input_error(name + ": " + torch_message(e));
  }
}

result<std::unique_ptr<dense_model>> make(std::shared_ptr<const std::string> archive,
                                          const torchscript_contract& c, int threads,
                                          uint64_t seed) {
  auto m = load_module(*archive, "model.file");
  if (!m)
    return m.failure();
  try {
    at::set_num_threads(std::max(threads, 1));
    // The module runs as eager PyTorch would: without the graph executor's optimisations, whose
    // differentiable subgraphs (symbolic autodiff) ran the Kaggle DLRM slower than eager here.
    torch::jit::setGraphExecutorOptimize(false);
    torch::manual_seed(seed);  // dropout and other random ops in the module
    return std::unique_ptr<dense_model>(new torchscript_model(std::move(*m), c));
  } catch (const std::exception& e) {
    return make_model_error("model.file: " + torch_message(e));
  }
}

result<std::string> with_params(const std::string& archive, const float* params, uint64_t count) {
  auto m = load_module(archive, "model.file");
  if (!m)
    return m.failure();
  try {
    torch::NoGradGuard no_grad;
    uint64_t off = 0;
    for (auto p : m->parameters()) {
      auto n = static_cast<uint64_t>(p.numel());
      if (off + n > count)
        return make_model_error("trained parameters: " + std::to_string(count)
                                + " floats, the module has more");
      p.copy_(torch::from_blob(const_cast<float*>(params + off), p.sizes()));
      off += n;
    }
    if (off != count)
      return make_model_error("trained parameters: " + std::to_string(count)
                              + " floats, the module has " + std::to_string(off));
    std::ostringstream out;
    m->save(out);
    return out.str();
  } catch (const std::exception& e) {
    return make_model_error("saving the trained module: " + torch_message(e));
  }
}

const torchscript_plugin_api api{torchscript_plugin_abi, SATRAP_TORCH_VERSION, &inspect, &make,
                                 &with_params};

}  // namespace
}  // namespace satrap

extern "C" __attribute__((visibility("default"))) const satrap::torchscript_plugin_api*
satrap_torchscript_plugin() {
  return &satrap::api;
}
