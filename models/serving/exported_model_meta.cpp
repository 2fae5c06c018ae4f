// MODEL.json: a model folder's manifest (format, name, version, network, pooling, initialiser,
// partitions), written last by an export and read first by every load.
#include "models/serving/model_folder.hpp"

#include <filesystem>
#include <fstream>

namespace satrap {

namespace fs = std::filesystem;

namespace {

const char* pooling_name(pooling p) { return feature_pooling_name(p); }
pooling pooling_from(const std::string& s) {
  return s == "mean" ? pooling::mean : s == "sqrtn" ? pooling::sqrtn : pooling::sum;
}

nlohmann::json features_json(const feature_schema& schema) {
  auto out = nlohmann::json::array();
  for (auto& f : schema)
    out.push_back({{"name", f.name},
                   {"kind", feature_kind_name(f.kind)},
                   {"table", f.table},
                   {"pooling", f.unpooled     ? "none"
                               : f.pool_given ? pooling_name(f.pool)
                                              : ""},
                   {"max_length", f.max_length},
                   {"weights", f.weights}});
  return out;
}

feature_schema features_from(const nlohmann::json& j) {
  feature_schema out;
  for (auto& x : j) {
    feature_spec f;
    f.name = x.at("name").get<std::string>();
    auto kind = x.at("kind").get<std::string>();
    bool known = false;
    for (auto k :
         {feature_kind::id, feature_kind::bag, feature_kind::sequence, feature_kind::dense})
      if (kind == feature_kind_name(k)) {
        f.kind = k;
        known = true;
      }
    if (!known)
      throw std::runtime_error("feature '" + f.name + "': unknown kind '" + kind + "'");
    f.table = x.at("table").get<std::string>();
    auto pool = x.at("pooling").get<std::string>();
    f.unpooled = pool == "none";
    f.pool_given = !pool.empty() && !f.unpooled;
    if (f.pool_given)
      f.pool = pooling_from(pool);
    f.max_length = x.at("max_length").get<int32_t>();
    f.weights = x.at("weights").get<bool>();
    out.push_back(std::move(f));
  }
  return out;
}
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
      {"tasks", n.tasks},
      {"sequences", n.sequences},
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
    {"features", features_json(m.features)},
    {"labels", m.labels},
    {"value_weights", m.value_weights},
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
    if (n.contains("tasks"))  // exports from before several labels have one task
      m.network.tasks = n.at("tasks").get<int>();
    if (n.contains("sequences"))  // and no unpooled sequences
      m.network.sequences = n.at("sequences").get<std::vector<int>>();
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
    m.pool = pooling_from(j.at("pooling").get<std::string>());
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
    if (j.contains("features"))  // and no named features
      m.features = features_from(j.at("features"));
    if (j.contains("labels"))
      m.labels = j.at("labels").get<std::vector<std::string>>();
    if (j.contains("value_weights"))
      m.value_weights = j.at("value_weights").get<bool>();
  } catch (const std::exception& ex) {
    return make_model_error(where + ": " + ex.what());
  }
  if (m.network.dim != m.embedding.dim || m.partitions == 0 || m.network.slots <= 0
      || m.network.tasks < 1 || m.network.tasks > 16)
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
