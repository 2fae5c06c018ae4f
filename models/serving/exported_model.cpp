#include "models/serving/exported_model.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "models/embedding/embedding_snapshot.hpp"
#include "models/embedding/embedding_table.hpp"
#include "models/embedding/fp16.hpp"
#include "models/embedding/id_map.hpp"

namespace satrap {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t emb_magic = 0x3130424d45544153ULL;  // "SATEMB01" little-endian
constexpr uint64_t empty_row = ~uint64_t{0};
constexpr size_t header_words = 8;

const char* pooling_name(pooling p) { return p == pooling::mean ? "mean" : "sum"; }
const char* init_name(embedding_init_kind k) {
  switch (k) {
    case embedding_init_kind::uniform: return "uniform";
    case embedding_init_kind::normal: return "normal";
    case embedding_init_kind::zeros: return "zeros";
  }
  return "uniform";
}

std::string shard_file_name(uint32_t k) { return "embeddings-" + std::to_string(k) + ".bin"; }

uint64_t pow2_at_least(uint64_t n) {
  uint64_t p = 16;
  while (p < n)
    p <<= 1;
  return p;
}

result<ok_t> write_text_atomic(const fs::path& path, const std::string& text) {
  auto tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out)
      return make_model_error("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return make_model_error("cannot rename " + tmp.string() + ": " + ec.message());
  return ok_t{};
}

struct file_entry {
  std::string name;
  uint32_t first = 0, last = 0;  // partitions [first, last)
  uint64_t rows = 0, bytes = 0, checksum = 0;
};

// One export shard: the rows of partitions [first, last), restored from the snapshot chain.
result<file_entry> write_shard(const fs::path& out, uint32_t k, uint32_t first, uint32_t last,
                               const exported_model_meta& meta, const std::string& root,
                               uint64_t sequence) {
  embedding_options o = meta.embedding;
  o.capacity = 0;  // hold every row of the range
  o.admission = admission_kind::all;
  embedding_table table(o);
  const uint32_t parts = meta.partitions;
  auto restored = snapshot_restore(table, root, sequence, [&](uint64_t id) {
    auto p = exported_partition_of(id, parts);
    return p >= first && p < last;
  });
  if (!restored)
    return make_model_error(restored.error());
  const auto& layout = table.layout();
  const uint64_t row_bytes = layout.fp16 ? uint64_t(o.dim) * 2 : uint64_t(o.dim) * 4;
  const uint64_t rows = table.size();
  const uint64_t slots = pow2_at_least(rows * 2);
  std::vector<uint64_t> index(slots * 2, empty_row);
  std::vector<std::byte> weights(rows * row_bytes);
  uint64_t r = 0;
  table.for_each_row(false, [&](uint64_t id, const std::byte* row) {
    uint64_t s = mix64(id) & (slots - 1);
    while (index[2 * s + 1] != empty_row)
      s = (s + 1) & (slots - 1);
    index[2 * s] = id;
    index[2 * s + 1] = r;
    std::memcpy(weights.data() + r * row_bytes, row, row_bytes);
    ++r;
  });
  uint64_t header[header_words] = {emb_magic, uint64_t(o.dim), layout.fp16 ? 1u : 0u, rows,
                                   slots, first, last, row_bytes};
  file_entry e;
  e.name = shard_file_name(k);
  e.first = first;
  e.last = last;
  e.rows = rows;
  snapshot_file_writer w((out / e.name).string());
  w.append(header, sizeof header);
  w.append(index.data(), index.size() * sizeof(uint64_t));
  weights.resize((weights.size() + 7) / 8 * 8);
  if (!weights.empty())
    w.append(weights.data(), weights.size());
  auto done = w.finish();
  if (!done)
    return make_model_error(done.error());
  e.bytes = done->bytes;
  e.checksum = done->checksum;
  return e;
}

nlohmann::json meta_json(const exported_model_meta& m) {
  const auto& n = m.network;
  return {
    {"format", exported_model_format},
    {"name", m.name},
    {"version", m.version},
    {"step", m.step},
    {"created_ns", m.created_ns},
    {"network",
     {{"type", dense_model_type_name(n.type)}, {"dense_features", n.dense_features},
      {"slots", n.slots}, {"dim", n.dim}, {"bottom", n.bottom}, {"top", n.top},
      {"cross_layers", n.cross_layers}}},
    {"pooling", pooling_name(m.pool)},
    {"embedding",
     {{"dim", m.embedding.dim}, {"init", init_name(m.embedding.init)},
      {"init_scale", m.embedding.init_scale}, {"seed", m.embedding.seed},
      {"precision", m.embedding.precision == weight_precision::fp16 ? "fp16" : "fp32"}}},
    {"partitions", m.partitions},
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
                   dense_model_type::wide_deep})
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
    m.pool = j.at("pooling").get<std::string>() == "mean" ? pooling::mean : pooling::sum;
    auto& e = j.at("embedding");
    m.embedding.dim = e.at("dim").get<int>();
    auto init = e.at("init").get<std::string>();
    m.embedding.init = init == "normal"  ? embedding_init_kind::normal
                       : init == "zeros" ? embedding_init_kind::zeros
                                         : embedding_init_kind::uniform;
    m.embedding.init_scale = e.at("init_scale").get<float>();
    m.embedding.seed = e.at("seed").get<uint64_t>();
    m.embedding.precision =
      e.at("precision").get<std::string>() == "fp16" ? weight_precision::fp16 : weight_precision::fp32;
    m.partitions = j.at("partitions").get<uint32_t>();
  } catch (const std::exception& ex) {
    return make_model_error(where + ": " + ex.what());
  }
  if (m.network.dim != m.embedding.dim || m.partitions == 0 || m.network.slots <= 0)
    return make_model_error(where + ": inconsistent model (dim, partitions or slots)");
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

}  // namespace

result<uint64_t> export_model(const std::string& out, const exported_model_meta& meta,
                              std::span<const float> dense_params,
                              const std::string& snapshot_root, uint64_t sequence,
                              uint32_t shards) {
  if (shards == 0 || shards > meta.partitions)
    return make_model_error("export shards: expected 1.." + std::to_string(meta.partitions)
                            + ", got " + std::to_string(shards));
  if (dense_params.size() != dense_model_param_count(meta.network))
    return make_model_error("export: " + std::to_string(dense_params.size())
                            + " dense parameters, the network has "
                            + std::to_string(dense_model_param_count(meta.network)));
  fs::path dir(out);
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec))
    return make_model_error(out + ": exists and is not empty (export into a new folder)");
  fs::create_directories(dir, ec);
  if (ec)
    return make_model_error(out + ": cannot create: " + ec.message());
  if (auto w = write_text_atomic(dir / "job.yaml", meta.job_yaml); !w)
    return make_model_error(w.error());
  nlohmann::json j = meta_json(meta);
  {
    snapshot_file_writer w((dir / "dense.bin").string());
    std::vector<float> padded(dense_params.begin(), dense_params.end());
    padded.resize((padded.size() + 1) / 2 * 2, 0.0f);
    if (!padded.empty())
      w.append(padded.data(), padded.size() * sizeof(float));
    auto done = w.finish();
    if (!done)
      return make_model_error(done.error());
    j["dense"] = {{"name", "dense.bin"}, {"params", dense_params.size()},
                  {"bytes", done->bytes}, {"checksum", done->checksum}};
  }
  uint64_t rows = 0;
  j["files"] = nlohmann::json::array();
  for (uint32_t k = 0; k < shards; ++k) {
    auto first = static_cast<uint32_t>(uint64_t{k} * meta.partitions / shards);
    auto last = static_cast<uint32_t>(uint64_t{k + 1} * meta.partitions / shards);
    auto e = write_shard(dir, k, first, last, meta, snapshot_root, sequence);
    if (!e)
      return make_model_error(e.error());
    rows += e.value().rows;
    auto& fe = e.value();
    j["files"].push_back({{"name", fe.name}, {"first_partition", fe.first},
                          {"last_partition", fe.last}, {"rows", fe.rows}, {"bytes", fe.bytes},
                          {"checksum", fe.checksum}});
  }
  j["rows"] = rows;
  if (auto w = write_text_atomic(dir / "MODEL.json", j.dump(2) + "\n"); !w)
    return make_model_error(w.error());
  return rows;
}

result<exported_model_meta> exported_model_read_meta(const std::string& dir) {
  auto j = read_manifest(dir);
  if (!j)
    return make_model_error(j.error());
  return meta_from_json(j.value(), (fs::path(dir) / "MODEL.json").string());
}

result<std::shared_ptr<const exported_model>> exported_model::open(const std::string& dir,
                                                                    std::vector<uint32_t> shards) {
  auto j = read_manifest(dir);
  if (!j)
    return make_model_error(j.error());
  auto where = (fs::path(dir) / "MODEL.json").string();
  auto meta = meta_from_json(j.value(), where);
  if (!meta)
    return make_model_error(meta.error());
  std::shared_ptr<exported_model> m(new exported_model());
  m->meta_ = std::move(meta.value());
  m->dir_ = dir;
  {
    std::ifstream in(fs::path(dir) / "job.yaml");
    std::stringstream ss;
    ss << in.rdbuf();
    m->meta_.job_yaml = ss.str();
  }
  try {
    auto& d = j.value().at("dense");
    auto f = mapped_file::open((fs::path(dir) / d.at("name").get<std::string>()).string(),
                               d.at("bytes").get<uint64_t>(), d.at("checksum").get<uint64_t>());
    if (!f)
      return make_model_error(f.error());
    auto count = d.at("params").get<uint64_t>();
    if (count != dense_model_param_count(m->meta_.network) || count * 4 > f->payload_bytes())
      return make_model_error(where + ": dense.bin does not hold the network's parameters");
    m->dense_file_ = std::make_unique<mapped_file>(std::move(f.value()));
    m->dense_ = {reinterpret_cast<const float*>(m->dense_file_->payload()), count};
    m->owner_.assign(m->meta_.partitions, -1);
    auto& files = j.value().at("files");
    for (uint32_t k = 0; k < files.size(); ++k) {
      if (!shards.empty() && std::find(shards.begin(), shards.end(), k) == shards.end())
        continue;
      auto& e = files[k];
      auto name = (fs::path(dir) / e.at("name").get<std::string>()).string();
      auto mf = mapped_file::open(name, e.at("bytes").get<uint64_t>(),
                                  e.at("checksum").get<uint64_t>());
      if (!mf)
        return make_model_error(mf.error());
      const auto* h = reinterpret_cast<const uint64_t*>(mf->payload());
      if (mf->payload_bytes() < header_words * 8 || h[0] != emb_magic)
        return make_model_error(name + ": not an embedding export file");
      shard_file s{std::move(mf.value())};
      s.slots = h[4];
      s.row_bytes = h[7];
      s.fp16 = h[2] == 1;
      uint64_t need = header_words * 8 + s.slots * 16 + h[3] * s.row_bytes;
      if (h[1] != uint64_t(m->dim()) || (s.slots & (s.slots - 1)) != 0 || h[6] > m->meta_.partitions
          || h[5] >= h[6] || s.row_bytes != uint64_t(m->dim()) * (s.fp16 ? 2 : 4)
          || need > s.file.payload_bytes())
        return make_model_error(name + ": header does not match MODEL.json");
      s.table = h + header_words;
      s.weights = s.file.payload() + header_words * 8 + s.slots * 16;
      for (uint64_t p = h[5]; p < h[6]; ++p)
        m->owner_[p] = static_cast<int32_t>(m->files_.size());
      m->rows_ += h[3];
      m->files_.push_back(std::move(s));
    }
    for (auto k : shards)
      if (k >= files.size())
        return make_model_error(where + ": no export shard " + std::to_string(k) + " (it has "
                                + std::to_string(files.size()) + ")");
  } catch (const std::exception& ex) {
    return make_model_error(where + ": " + ex.what());
  }
  return std::shared_ptr<const exported_model>(std::move(m));
}

uint64_t exported_model::mapped_bytes() const {
  uint64_t b = dense_file_ ? dense_file_->file_bytes() : 0;
  for (auto& f : files_)
    b += f.file.file_bytes();
  return b;
}

bool exported_model::holds(uint64_t id) const {
  return owner_[exported_partition_of(id, meta_.partitions)] >= 0;
}

void exported_model::lookup(uint64_t id, float* out) const {
  auto owner = owner_[exported_partition_of(id, meta_.partitions)];
  const auto& f = files_[static_cast<size_t>(owner)];
  const int dim = this->dim();
  uint64_t s = mix64(id) & (f.slots - 1);
  for (;;) {
    uint64_t row = f.table[2 * s + 1];
    if (row == empty_row)
      break;
    if (f.table[2 * s] == id) {
      const std::byte* w = f.weights + row * f.row_bytes;
      if (f.fp16) {
        uint16_t h;
        for (int d = 0; d < dim; ++d) {
          std::memcpy(&h, w + 2 * d, 2);
          out[d] = f16_to_f32(h);
        }
      } else {
        std::memcpy(out, w, sizeof(float) * dim);
      }
      return;
    }
    s = (s + 1) & (f.slots - 1);
  }
  embedding_init_row(meta_.embedding, id, out);
}

model_scorer::model_scorer(std::shared_ptr<const exported_model> model)
    : model_(std::move(model)), net_(make_dense_model(model_->meta().network, 0)) {
  auto src = model_->dense_params();
  auto dst = net_->params();
  std::copy(src.begin(), src.end(), dst.begin());
}

void model_scorer::score(int size, std::span<const uint32_t> offsets,
                         std::span<const uint64_t> ids, std::span<const float> dense,
                         float* logits) {
  const int dim = model_->dim();
  auto dedup = dedup_ids(ids);
  rows_.resize(dedup.unique.size() * dim);
  for (size_t k = 0; k < dedup.unique.size(); ++k)
    model_->lookup(dedup.unique[k], rows_.data() + k * dim);
  pooled_.resize(static_cast<size_t>(size) * model_->slots() * dim);
  pool_forward(model_->meta().pool, dim, offsets, dedup.inverse, rows_.data(), pooled_.data());
  net_->forward(size, dense.data(), pooled_.data(), logits);
}

std::string check_score_input(const exported_model& model, int size,
                              std::span<const uint32_t> offsets, std::span<const uint64_t> ids,
                              std::span<const float> dense) {
  if (size <= 0)
    return "no instances";
  if (offsets.size() != static_cast<size_t>(size) * model.slots() + 1)
    return "expected " + std::to_string(model.slots()) + " slots per instance";
  if (dense.size() != static_cast<size_t>(size) * model.dense_features())
    return "expected " + std::to_string(model.dense_features()) + " dense features per instance";
  if (offsets.front() != 0 || offsets.back() != ids.size())
    return "bag offsets do not cover the ids";
  for (size_t b = 1; b < offsets.size(); ++b)
    if (offsets[b] < offsets[b - 1])
      return "bag offsets are not ascending";
  for (auto id : ids)
    if (!model.holds(id))
      return "id " + std::to_string(id) + " is in partition "
             + std::to_string(exported_partition_of(id, model.meta().partitions))
             + ", which this server does not hold";
  return "";
}

}  // namespace satrap
