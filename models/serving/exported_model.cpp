#include "models/serving/exported_model.hpp"

#include "models/serving/model_folder.hpp"

#include "models/embedding/embedding_table.hpp"
#include "models/embedding/fp16.hpp"
#include "models/embedding/id_map.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace satrap {

namespace fs = std::filesystem;
using namespace model_folder;

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
  if (m->named()) {
    auto layout = feature_schema_layout(m->meta_.features, m->meta_.pool);
    if (!layout)
      return make_model_error(where + ": features: " + layout.error());
    m->layout_ = std::move(layout.value());
    m->slot_pool_ = m->layout_.sequences.model_pooling(m->layout_.slot_pool);
    auto& n = m->meta_.network;
    if (static_cast<int>(m->slot_pool_.size()) != n.slots
        || m->layout_.sequences.model_dense(std::max(m->layout_.dense, 1)) != n.dense_features
        || !m->meta_.crosses.empty() || static_cast<int>(m->meta_.labels.size()) != n.tasks)
      return make_model_error(where + ": inconsistent model (its features, labels or crosses "
                                      "do not fit its network)");
  }
  {
    std::ifstream in(fs::path(dir) / "job.yaml");
    std::stringstream ss;
    ss << in.rdbuf();
    m->meta_.job_yaml = ss.str();
  }
  try {
    if (m->meta_.network.type == dense_model_type::torchscript) {
      auto& mod = j.value().at("module");
      auto path = (fs::path(dir) / mod.at("name").get<std::string>()).string();
      std::ifstream in(path, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof())
        return make_model_error(path + ": cannot read the model's TorchScript module");
      if (bytes.size() != mod.at("bytes").get<uint64_t>())
        return make_model_error(path + ": " + std::to_string(bytes.size())
                                + " bytes, MODEL.json says " + mod.at("bytes").dump()
                                + " (a damaged or unfinished export)");
      m->meta_.network.torchscript = std::make_shared<const std::string>(std::move(bytes));
      m->meta_.network.torchscript_file = path;
      auto net = make_dense_model_checked(m->meta_.network, 0);  // libtorch present, module fits
      if (!net)
        return make_model_error(path + ": " + net.error());
    }
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
      auto mf =
        mapped_file::open(name, e.at("bytes").get<uint64_t>(), e.at("checksum").get<uint64_t>());
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
    m->holds_all_ = std::find(m->owner_.begin(), m->owner_.end(), -1) == m->owner_.end();
    for (auto k : shards)
      if (k >= files.size() && !(k == exported_no_shards && shards.size() == 1))
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

std::vector<std::pair<uint32_t, uint32_t>> exported_model::held_ranges() const {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (uint32_t p = 0; p < owner_.size(); ++p)
    if (owner_[p] >= 0) {
      if (!out.empty() && out.back().second == p)
        out.back().second = p + 1;
      else
        out.emplace_back(p, p + 1);
    }
  return out;
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

void model_scorer::score(int size, std::span<const uint32_t> offsets, std::span<const uint64_t> ids,
                         std::span<const float> weights, std::span<const float> dense,
                         float* logits) {
  const int dim = model_->dim();
  auto dedup = dedup_ids(ids);
  rows_.resize(dedup.unique.size() * dim);
  for (size_t k = 0; k < dedup.unique.size(); ++k)
    model_->lookup(dedup.unique[k], rows_.data() + k * dim);
  score_rows(size, offsets, dedup, rows_.data(), weights, dense, logits);
}

void model_scorer::score_rows(int size, std::span<const uint32_t> offsets,
                              const dedup_result& dedup, const float* rows,
                              std::span<const float> weights, std::span<const float> dense,
                              float* logits) {
  const int dim = model_->dim();
  pooled_.resize(static_cast<size_t>(size) * model_->slots() * dim);
  if (model_->slot_pool().empty() && weights.empty()) {
    pool_forward(model_->meta().pool, dim, offsets, dedup.inverse, rows, pooled_.data());
  } else {  // per slot and weighted, as the gradient aggregator pools
    row_ptrs_.resize(dedup.unique.size());
    for (size_t k = 0; k < dedup.unique.size(); ++k)
      row_ptrs_[k] = rows + k * dim;
    const pooling one[] = {model_->meta().pool};
    std::span<const pooling> slot_pool = model_->slot_pool();
    if (slot_pool.empty())
      slot_pool = one;
    pool_forward_rows_slots(slot_pool, weights, dim, offsets, dedup.inverse, row_ptrs_,
                            pooled_.data());
  }
  net_->forward(size, dense.data(), pooled_.data(), logits);
}

std::string check_score_input(const exported_model& model, int size,
                              std::span<const uint32_t> offsets, std::span<const uint64_t> ids,
                              std::span<const float> weights, std::span<const float> dense) {
  if (size <= 0)
    return "no instances";
  if (offsets.size() != static_cast<size_t>(size) * model.slots() + 1)
    return "expected " + std::to_string(model.slots()) + " slots per instance";
  if (dense.size() != static_cast<size_t>(size) * model.dense_features())
    return "expected " + std::to_string(model.dense_features()) + " dense features per instance";
  if (offsets.front() != 0 || offsets.back() != ids.size())
    return "bag offsets do not cover the ids";
  if (model.weighted() ? weights.size() != ids.size() : !weights.empty())
    return model.weighted() ? "expected one weight per id (the model's ids carry weights)"
                            : "the model takes no weights";
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
