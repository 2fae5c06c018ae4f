// The model.* keys of the job spec: the dense network, the dense optimizer and its schedule, the
// embedding tables and their sparse optimizer. Their rows in the key table and the checks of the
// keys taken together. (See job_spec_fields.hpp for how the job spec's files are laid out.)
#include "models/dense/torchscript.hpp"
#include "models/reference_trainer.hpp"
#include "runtime/base64.hpp"
#include "runtime/text_file.hpp"
#include "models/tier/cold_store.hpp"
#include "spec/job_spec_fields.hpp"
#include "spec/manifest.hpp"

namespace satrap::job_spec_detail {

std::vector<job_field> model_fields() {
  return {
    SATRAP_ENUM_FIELD(
      "model.type", "model", "dense model", model.network.type, {"dlrm", dense_model_type::dlrm},
      {"dcn_v2", dense_model_type::dcn_v2}, {"deepfm", dense_model_type::deepfm},
      {"wide_deep", dense_model_type::wide_deep}, {"torchscript", dense_model_type::torchscript}),
    SATRAP_STRING_FIELD("model.file", "model-file",
                        "torchscript: the module's file, from torch.jit.script(m).save(path)",
                        model.file),
    // The module's bytes, read from model.file when the job is read: the job's text carries them
    // to every node (a node has no copy of the file). Not for a user to set.
    job_field{
      "model.module", "", "torchscript: the module file's bytes (base64; set from model.file)",
      [](job_spec& s, const std::string& t) -> std::string {
        if (t.empty()) {
          s.model.network.torchscript.reset();
          return "";
        }
        if (t.size() > torchscript_archive_bytes_max / 3 * 4 + 4)
          return "at most " + std::to_string(torchscript_archive_bytes_max >> 20)
                 + " MiB of module";
        auto bytes = base64_decode(t);
        if (!bytes)
          return "base64 text (this key is written by satrap from model.file)";
        s.model.network.torchscript = std::make_shared<const std::string>(std::move(*bytes));
        return "";
      },
      [](const job_spec& s) {
        auto& m = s.model.network.torchscript;
        return m ? base64_encode(*m) : std::string{};
      }},
    SATRAP_INT_FIELD("model.dim", "dim", "embedding size (= bottom MLP output)", model.network.dim,
                     1, 4096),
    SATRAP_SIZES_FIELD("model.bottom", "bottom", "bottom MLP hidden sizes", model.network.bottom),
    SATRAP_SIZES_FIELD("model.top", "top", "top (deep) MLP hidden sizes", model.network.top),
    SATRAP_ENUM_FIELD("model.interaction", "interaction",
                      "dlrm: dot, cat (raw embeddings to the top MLP) or dot_cat",
                      model.network.interaction, {"dot", dlrm_interaction::dot},
                      {"cat", dlrm_interaction::cat}, {"dot_cat", dlrm_interaction::dot_cat}),
    SATRAP_REAL_FIELD("model.dropout", "dropout",
                      "dlrm: dropout on the top MLP's hidden layers (training only)",
                      model.network.dropout, 0.0, 0.9),
    SATRAP_ENUM_FIELD(
      "model.precision", "precision",
      "GEMM precision: fp32, or bf16 / fp16 with fp32 master weights (training.device cuda only)",
      model.network.precision, {"fp32", dense_precision::fp32}, {"bf16", dense_precision::bf16},
      {"fp16", dense_precision::fp16}),
    SATRAP_INT_FIELD("model.cross_layers", "cross-layers", "dcn_v2: cross layers",
                     model.network.cross_layers, 0, 64),
    SATRAP_ENUM_FIELD("model.pooling", "pooling", "bag pooling", model.pool, {"sum", pooling::sum},
                      {"mean", pooling::mean}),
    SATRAP_ENUM_FIELD("model.dense_optimizer.kind", "dense-optimizer", "dense optimizer",
                      model.dense.kind, {"sgd", dok::sgd}, {"adagrad", dok::adagrad},
                      {"adam", dok::adam}),
    SATRAP_REAL_FIELD("model.dense_optimizer.learning_rate", "dense-lr", "dense learning rate",
                      model.dense.learning_rate, 0.0, 100.0),
    SATRAP_ENUM_FIELD("model.dense_optimizer.schedule.kind", "dense-schedule",
                      "dense learning-rate schedule", model.dense.schedule.kind,
                      {"constant", lsk::constant}, {"warmup", lsk::warmup}, {"step", lsk::step},
                      {"exponential", lsk::exponential}, {"cosine", lsk::cosine},
                      {"inverse_sqrt", lsk::inverse_sqrt}),
    SATRAP_INT_FIELD("model.dense_optimizer.schedule.warmup_steps", "",
                     "linear warm-up steps (any kind)", model.dense.schedule.warmup_steps,
                     int64_t{0}, i64max),
    SATRAP_INT_FIELD("model.dense_optimizer.schedule.decay_steps", "",
                     "step/exponential: period; cosine: length", model.dense.schedule.decay_steps,
                     int64_t{0}, i64max),
    SATRAP_REAL_FIELD("model.dense_optimizer.schedule.decay_rate", "",
                      "step/exponential: factor per period", model.dense.schedule.decay_rate, 0.0,
                      1.0),
    SATRAP_REAL_FIELD("model.dense_optimizer.schedule.min_factor", "",
                      "cosine: floor, fraction of the base rate", model.dense.schedule.min_factor,
                      0.0, 1.0),
    SATRAP_REAL_FIELD("model.dense_optimizer.weight_decay", "", "dense L2 coefficient",
                      model.dense.weight_decay, 0.0, 100.0),
    SATRAP_REAL_FIELD("model.dense_optimizer.eps", "", "dense optimizer denominator guard",
                      model.dense.eps, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.dense_optimizer.beta1", "", "Adam first-moment decay",
                      model.dense.beta1, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.dense_optimizer.beta2", "", "Adam second-moment decay",
                      model.dense.beta2, 0.0, 1.0),
    SATRAP_REAL_FIELD(
      "model.dense_optimizer.ema_decay", "dense-ema",
      "evaluate a moving average of the dense weights, ema = d*ema + (1-d)*w per step; 0 = off",
      model.dense.ema_decay, 0.0, 0.999999),
    SATRAP_ENUM_FIELD("model.embedding.optimizer", "embedding-optimizer", "sparse optimizer",
                      model.embedding.optimizer, {"sgd", sok::sgd}, {"adagrad", sok::adagrad},
                      {"rowwise_adagrad", sok::rowwise_adagrad}, {"adam", sok::adam},
                      {"ftrl", sok::ftrl}),
    SATRAP_REAL_FIELD("model.embedding.learning_rate", "embedding-lr", "sparse learning rate",
                      model.embedding.learning_rate, 0.0, 100.0),
    SATRAP_ENUM_FIELD("model.embedding.schedule.kind", "embedding-schedule",
                      "sparse learning-rate schedule", model.embedding.schedule.kind,
                      {"constant", lsk::constant}, {"warmup", lsk::warmup}, {"step", lsk::step},
                      {"exponential", lsk::exponential}, {"cosine", lsk::cosine},
                      {"inverse_sqrt", lsk::inverse_sqrt}),
    SATRAP_INT_FIELD("model.embedding.schedule.warmup_steps", "", "linear warm-up steps (any kind)",
                     model.embedding.schedule.warmup_steps, int64_t{0}, i64max),
    SATRAP_INT_FIELD("model.embedding.schedule.decay_steps", "",
                     "step/exponential: period; cosine: length",
                     model.embedding.schedule.decay_steps, int64_t{0}, i64max),
    SATRAP_REAL_FIELD("model.embedding.schedule.decay_rate", "",
                      "step/exponential: factor per period", model.embedding.schedule.decay_rate,
                      0.0, 1.0),
    SATRAP_REAL_FIELD("model.embedding.schedule.min_factor", "",
                      "cosine: floor, fraction of the base rate",
                      model.embedding.schedule.min_factor, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.embedding.initial_accumulator", "", "Adagrad / FTRL accumulator start",
                      model.embedding.initial_accumulator, 0.0, 100.0),
    SATRAP_REAL_FIELD("model.embedding.eps", "", "Adagrad / Adam denominator guard",
                      model.embedding.eps, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.embedding.init_scale", "", "rows start uniform(-s, s) or normal(0, s)",
                      model.embedding.init_scale, 0.0, 10.0),
    SATRAP_ENUM_FIELD("model.embedding.init", "", "initial rows (deterministic per id)",
                      model.embedding.init, {"uniform", embedding_init_kind::uniform},
                      {"normal", embedding_init_kind::normal},
                      {"zeros", embedding_init_kind::zeros}),
    SATRAP_REAL_FIELD("model.embedding.beta1", "", "sparse Adam first-moment decay",
                      model.embedding.beta1, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.embedding.beta2", "", "sparse Adam second-moment decay",
                      model.embedding.beta2, 0.0, 1.0),
    SATRAP_REAL_FIELD("model.embedding.ftrl_beta", "", "FTRL-Proximal beta",
                      model.embedding.ftrl_beta, 0.0, 100.0),
    SATRAP_REAL_FIELD("model.embedding.ftrl_l1", "", "FTRL-Proximal L1 strength",
                      model.embedding.ftrl_l1, 0.0, 100.0),
    SATRAP_REAL_FIELD("model.embedding.ftrl_l2", "", "FTRL-Proximal L2 strength",
                      model.embedding.ftrl_l2, 0.0, 100.0),
    SATRAP_REAL_FIELD("model.embedding.weight_decay", "", "sparse L2: g += weight_decay * w",
                      model.embedding.weight_decay, 0.0, 100.0),
    SATRAP_REAL_FIELD("model.embedding.clip", "", "weights clamped to [-clip, clip]; 0 = off",
                      model.embedding.clip, 0.0, 1e30),
    SATRAP_ENUM_FIELD("model.embedding.precision", "", "stored weights (optimizer state is fp32)",
                      model.embedding.precision, {"fp32", weight_precision::fp32},
                      {"fp16", weight_precision::fp16}),
    SATRAP_INT_FIELD("model.embedding.capacity", "", "rows per shard at most; 0 = unbounded",
                     model.embedding.capacity, uint64_t{0}, uint64_t{4000000000}),
    SATRAP_ENUM_FIELD(
      "model.embedding.eviction", "", "a full shard: evict (clock) or admit nothing (none)",
      model.embedding.eviction, {"clock", eviction_kind::clock}, {"none", eviction_kind::none}),
    SATRAP_ENUM_FIELD("model.embedding.admission", "", "which unseen ids get a row",
                      model.embedding.admission, {"all", admission_kind::all},
                      {"probability", admission_kind::probability},
                      {"count_min", admission_kind::count_min}),
    SATRAP_REAL_FIELD("model.embedding.admit_probability", "",
                      "admission=probability: chance per sighting",
                      model.embedding.admit_probability, 0.0, 1.0),
    SATRAP_INT_FIELD("model.embedding.admit_after", "",
                     "admission=count_min: sightings before a row", model.embedding.admit_after,
                     uint32_t{1}, uint32_t{65535}),
    SATRAP_INT_FIELD("model.embedding.sketch_width", "", "count-min sketch counters per row",
                     model.embedding.sketch_width, uint32_t{1}, uint32_t{1} << 30),
    SATRAP_INT_FIELD("model.embedding.sketch_depth", "", "count-min sketch rows",
                     model.embedding.sketch_depth, uint32_t{1}, uint32_t{16}),
    SATRAP_ENUM_FIELD("model.embedding.simd", "",
                      "store kernels: auto (AVX2 when present) or scalar", model.embedding.simd,
                      {"auto", simd_choice::automatic}, {"scalar", simd_choice::scalar}),
    SATRAP_ENUM_FIELD("model.embedding.tier.kind", "embedding-tier",
                      "none (every row in RAM) or ssd (hot rows in RAM, the rest on local disk)",
                      model.tier.kind, {"none", tier_kind::none}, {"ssd", tier_kind::ssd}),
    SATRAP_ENUM_FIELD("model.embedding.tier.store", "embedding-tier-store",
                      "tier ssd: the cold store, rocksdb or slot_file (tests/bench/README.md)",
                      model.tier.store, {"rocksdb", cold_store_kind::rocksdb},
                      {"slot_file", cold_store_kind::slot_file}),
    SATRAP_STRING_FIELD("model.embedding.tier.path", "embedding-tier-path",
                        "tier ssd: folder of the cold rows (shard k uses PATH/shard-k)",
                        model.tier.path),
    job_field{"model.embedding.tier.ram_budget", "embedding-tier-ram",
              "tier ssd: RAM per shard for hot rows, e.g. 1GiB",
              [](job_spec& s, const std::string& t) {
                if (!parse_bytes(t, s.model.tier.ram_budget))
                  return std::string("a size such as 512MiB or 2GiB");
                return std::string{};
              },
              [](const job_spec& s) { return std::to_string(s.model.tier.ram_budget); }},
  };
}

namespace {

// model.embedding.tier: what the tier needs, checked before any shard starts.
caf::error tier_finalize(const job_spec& spec) {
  const tier_options& tier = spec.model.tier;
  if (tier.kind == tier_kind::none)
    return {};
  if (!cold_store_available(tier.store))
    return bad_spec(std::string("model.embedding.tier.store: ") + cold_store_kind_name(tier.store)
                    + " is not compiled into this build (librocksdb-dev was missing: ops/setup.sh "
                      "installs it); expected slot_file, or a build with RocksDB");
  if (tier.path.empty())
    return bad_spec("model.embedding.tier.path: tier ssd needs a folder on local disk");
  if (tier.ram_budget == 0)
    return bad_spec("model.embedding.tier.ram_budget: tier ssd needs a RAM budget, e.g. 1GiB");
  if (spec.model.embedding.eviction != eviction_kind::clock || spec.model.embedding.capacity != 0)
    return bad_spec(
      "model.embedding.capacity / eviction: tier ssd sets the shard's capacity from its "
      "ram_budget and evicts to disk; expected capacity 0 and eviction clock");
  if (spec.training.early_stopping.patience > 0)
    return bad_spec(
      "model.embedding.tier: early stopping (its best model's snapshot) with the SSD tier is not "
      "built yet; expected training.early_stopping.patience 0");
  return {};
}

}  // namespace

namespace {

// model.type torchscript: the module read from model.file (unless the job's text carried it) and
// checked against the data's shapes with one dry forward; the planner's parameter count from it.
caf::error torchscript_finalize(job_spec& spec) {
  auto& net = spec.model.network;
  if (!net.torchscript) {
    if (spec.model.file.empty())
      return bad_spec(
        "model.file: model.type torchscript needs the module's file (--model-file PATH), made "
        "with torch.jit.script(module).save(PATH); see README \"Your model\"");
    auto bytes =
      read_text_file(spec.model.file, torchscript_archive_bytes_max, "TorchScript model file");
    if (!bytes)
      return bad_spec("model.file: " + error_text(bytes.error()));
    net.torchscript = std::make_shared<const std::string>(std::move(*bytes));
  }
  net.torchscript_file = spec.model.file;
  if (spec.training.device == dense_device::cuda)
    return bad_spec(
      "training.device cuda: model.type torchscript runs on the CPU in this build (Debian's "
      "libtorch has no CUDA); expected training.device cpu");
  if (net.precision != dense_precision::fp32)
    return bad_spec("model.precision: model.type torchscript computes in fp32; expected fp32");
  auto plugin = torchscript_plugin();
  if (!plugin)
    return bad_spec(plugin.error());
  auto info = (*plugin)->inspect(
    *net.torchscript, spec.model.file.empty() ? "model.file" : spec.model.file,
    torchscript_contract{net.dense_features, net.slots, net.dim, net.tasks, net.task_weights,
                         net.sequences});
  if (!info)
    return bad_spec("model.file " + info.error());
  net.torchscript_params = info->params;
  return caf::none;
}

}  // namespace

// Runs after data_finalize has set the network's slots and dense features from the data.
caf::error model_finalize(job_spec& spec) {
  if (auto err = tier_finalize(spec))
    return err;
  auto& net = spec.model.network;
  // The default job's settings (reference_trainer.hpp: a linear top over dot_cat, the dense
  // weights' average) are the CPU DLRM's. Another model type, or training.device cuda (whose DLRM
  // has the dot interaction and no weight average), gets the zoo's deep MLP, the dot interaction
  // and no average, for each of those keys neither set by a file or flag nor changed in code; a key
  // that was set is held to what it asked by the checks below.
  auto set = [&](const char* key) { return spec.keys_set.count(key) > 0; };
  const bool cuda = spec.training.device == dense_device::cuda;
  if (net.type != dense_model_type::dlrm || cuda) {
    if (!set("model.top") && net.top == default_job_model().top)
      net.top = dense_model_config{}.top;
    if (!set("model.interaction") && net.interaction == default_job_model().interaction)
      net.interaction = dense_model_config{}.interaction;
  }
  if (cuda && !set("model.dense_optimizer.ema_decay")
      && spec.model.dense.ema_decay == default_job_dense().ema_decay)
    spec.model.dense.ema_decay = 0.0f;
  if (auto why = dense_model_tasks_error(net); !why.empty())
    return bad_spec("data.labels: " + why);
  if (net.tasks > 1 && cuda)
    return bad_spec(
      "data.labels: several tasks train on training.device cpu in this version (the device "
      "models have one logit); expected training.device cpu or one label");
  if (!net.sequences.empty() && net.type != dense_model_type::torchscript) {
    auto seq = job_data_sequences(spec.data);
    return bad_spec("data.features: feature '" + (seq.names.empty() ? "?" : seq.names[0])
                    + "' has pooling: none (unpooled, [B, max_length, E]), which a model of "
                      "model.type torchscript takes; the built-in "
                    + dense_model_type_name(net.type)
                    + " takes pooled features: expected pooling sum, mean or sqrtn, or "
                      "model.type torchscript");
  }
  if (net.type == dense_model_type::torchscript) {
    if (auto err = torchscript_finalize(spec))
      return err;
  } else if (!spec.model.file.empty()) {
    return bad_spec("model.file: " + spec.model.file + " is given but model.type is "
                    + dense_model_type_name(net.type)
                    + "; expected model.type torchscript (--model-type torchscript) with a file");
  }
  if (net.type == dense_model_type::dlrm && net.dropout > 0.0f && net.top.empty())
    return bad_spec(
      "model.dropout: the top MLP has no hidden layers to drop (model.top is []); give "
      "model.top hidden sizes, e.g. --top 64,32");
  if (net.bottom.empty() && net.dense_features != net.dim)
    return bad_spec("model.bottom: expected at least one layer");
  for (auto [s, what] : {std::pair{&spec.model.dense.schedule, "model.dense_optimizer.schedule"},
                         {&spec.model.embedding.schedule, "model.embedding.schedule"}})
    if (auto want = lr_schedule_check(*s, what); !want.empty())
      return bad_spec(want);
  if (spec.model.embedding.optimizer == sok::ftrl
      && (spec.model.embedding.schedule.kind != lsk::constant
          || spec.model.embedding.schedule.warmup_steps > 0))
    return bad_spec(
      "model.embedding.schedule: FTRL keeps per-coordinate rates of its own; expected kind "
      "constant without warm-up for optimizer ftrl");
  if (net.type != dense_model_type::dlrm
      && (net.dropout > 0.0f || net.interaction != dlrm_interaction::dot))
    return bad_spec(
      "model.dropout / model.interaction: expected model.type dlrm (the other models have "
      "neither)");
  if (spec.model.dense.ema_decay > 0.0f && spec.training.device == dense_device::cuda)
    return bad_spec(
      "model.dense_optimizer.ema_decay: expected training.device cpu (the device optimizer "
      "keeps no weight average)");
  if (net.precision != dense_precision::fp32 && spec.training.device != dense_device::cuda)
    return bad_spec(std::string("model.precision: ") + dense_precision_name(net.precision)
                    + " needs training.device cuda (the CPU dense path computes in fp32 only)");
  return caf::none;
}

}  // namespace satrap::job_spec_detail
