// MODEL.json: a model folder's manifest (format, name, version, network, pooling, initialiser,
// partitions), written last by an export and read first by every load.
#include "models/serving/model_folder.hpp"

#include <filesystem>
#include <fstream>

namespace satrap {

namespace fs = std::filesystem;

namespace {

const char* pooling_name(pooling p) { return p == pooling::mean ? "mean" : "sum"; }
const char* init_name(embedding_init_kind k) {
  switch (k) {
    case embedding_init_kind::uniform: return "uniform";
    case embedding_init_kind::normal: return "normal";
    case embedding_init_kind::zeros: return "zeros";
  }
  return "uniform";
}
const char* interaction_name(dlrm_interaction i) {
  switch (i) {
    case dlrm_interaction::dot: return "dot";
    case dlrm_interaction::cat: return "cat";
    case dlrm_interaction::dot_cat: return "dot_cat";
  }
  return "dot";
}

}  // namespace

namespace model_folder {

nlohmann::json meta_json(const exported_model_meta& m) {
  const auto& n = m.network;
  return {
    {"format", exported_model_format},
    {"name", m.name},
    {"version", m.version},
    {"step", m.step},
    {"created_ns", m.created_ns},
    {"network",
     {{"type", dense_model_type_name(n.type)},
      {"dense_features", n.dense_features},
      {"slots", n.slots},
      {"dim", n.dim},
      {"bottom", n.bottom},
      {"top", n.top},
      {"cross_layers", n.cross_layers},
      {"interaction", interaction_name(n.interaction)},
      {"params", dense_model_param_count(n)}}},
    {"pooling", pooling_name(m.pool)},
    {"embedding",
     {{"dim", m.embedding.dim},
      {"init", init_name(m.embedding.init)},
      {"init_scale", m.embedding.init_scale},
      {"seed", m.embedding.seed},
      {"precision", m.embedding.precision == weight_precision::fp16 ? "fp16" : "fp32"}}},
    {"partitions", m.partitions},
    {"crosses", m.crosses},
  };
}

result<exported_model_meta> meta_from_json(const nlohmann::json& j, const std::string& where) {
  exported_model_meta m;
  try {
    if (j.at("format").get<int>() != exported_model_format)
      return make_model_error(where + ": format " + j.at("format").dump() + ", this satrap reads "
                              + std::to_string(exported_model_format));
    m.name = j.at("name").get<std::string>();
    m.version = j.at("version").get<std::string>();
    m.step = j.at("step").get<int64_t>();
    m.created_ns = j.at("created_ns").get<uint64_t>();
    auto& n = j.at("network");
    auto type = n.at("type").get<std::string>();
    bool known = false;
    for (auto t : {dense_model_type::dlrm, dense_model_type::dcn_v2, dense_model_type::deepfm,
                   dense_model_type::wide_deep, dense_model_type::torchscript})
      if (type == dense_model_type_name(t)) {
        m.network.type = t;
        known = true;
      }
    if (!known)
      return make_model_error(where + ": unknown network type '" + type + "'");
    m.network.dense_features = n.at("dense_features").get<int>();
    m.network.slots = n.at("slots").get<int>();
    m.network.dim = n.at("dim").get<int>();
    m.network.bottom = n.at("bottom").get<std::vector<int>>();
    m.network.top = n.at("top").get<std::vector<int>>();
    m.network.cross_layers = n.at("cross_layers").get<int>();
    if (m.network.type == dense_model_type::torchscript)  // the module itself: module.pt
      m.network.torchscript_params = n.at("params").get<uint64_t>();
    if (n.contains("interaction")) {  // exports from before the interaction key are dot
      auto inter = n.at("interaction").get<std::string>();
      bool found = false;
      for (auto i : {dlrm_interaction::dot, dlrm_interaction::cat, dlrm_interaction::dot_cat})
        if (inter == interaction_name(i)) {
          m.network.interaction = i;
          found = true;
        }
      if (!found)
        return make_model_error(where + ": unknown network interaction '" + inter
                                + "' (dot, cat or dot_cat)");
    }
    m.pool = j.at("pooling").get<std::string>() == "mean" ? pooling::mean : pooling::sum;
    auto& e = j.at("embedding");
    m.embedding.dim = e.at("dim").get<int>();
    auto init = e.at("init").get<std::string>();
    m.embedding.init = init == "normal"  ? embedding_init_kind::normal
                       : init == "zeros" ? embedding_init_kind::zeros
                                         : embedding_init_kind::uniform;
    m.embedding.init_scale = e.at("init_scale").get<float>();
    m.embedding.seed = e.at("seed").get<uint64_t>();
    m.embedding.precision = e.at("precision").get<std::string>() == "fp16" ? weight_precision::fp16
                                                                           : weight_precision::fp32;
    m.partitions = j.at("partitions").get<uint32_t>();
    if (j.contains("crosses"))  // exports from before feature crosses have none
      m.crosses = j.at("crosses").get<feature_crosses>();
  } catch (const std::exception& ex) {
    return make_model_error(where + ": " + ex.what());
  }
  if (m.network.dim != m.embedding.dim || m.partitions == 0 || m.network.slots <= 0)
    return make_model_error(where + ": inconsistent model (dim, partitions or slots)");
  auto input = m.network.slots - static_cast<int>(m.crosses.size());
  if (input <= 0)
    return make_model_error(where + ": inconsistent model (more crosses than slots)");
  if (auto crosses = check_crosses(m.crosses, input, "crosses"); !crosses)
    return make_model_error(where + ": inconsistent model (" + crosses.error() + ")");
  return m;
}

result<nlohmann::json> read_manifest(const std::string& dir) {
  auto path = (fs::path(dir) / "MODEL.json").string();
  std::ifstream in(path);
  if (!in)
    return make_model_error(path + ": not found (not a model folder, or an unfinished export)");
  try {
    return nlohmann::json::parse(in);
  } catch (const std::exception& ex) {
    return make_model_error(path + ": " + ex.what());
  }
}

}  // namespace model_folder

result<exported_model_meta> exported_model_read_meta(const std::string& dir) {
  auto j = model_folder::read_manifest(dir);
  if (!j)
    return make_model_error(j.error());
  return model_folder::meta_from_json(j.value(), (fs::path(dir) / "MODEL.json").string());
}

}  // namespace satrap
