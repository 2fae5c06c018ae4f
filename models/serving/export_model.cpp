// export_model: writes a model folder (exported_model.hpp) from a finalised network's dense
// parameters and an embedding snapshot chain, the manifest last.
#include "models/serving/model_folder.hpp"
#include "models/dense/torchscript.hpp"

#include "models/embedding/embedding_snapshot.hpp"
#include "models/embedding/embedding_table.hpp"
#include "models/embedding/fp16.hpp"
#include "models/embedding/id_map.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace satrap {

namespace fs = std::filesystem;
using namespace model_folder;

namespace {

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
  uint64_t header[header_words] = {
    emb_magic, uint64_t(o.dim), layout.fp16 ? 1u : 0u, rows, slots, first, last, row_bytes};
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

}  // namespace

result<uint64_t> export_model(const std::string& out, const exported_model_meta& meta,
                              std::span<const float> dense_params, const std::string& snapshot_root,
                              uint64_t sequence, uint32_t shards) {
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
    j["dense"] = {{"name", "dense.bin"},
                  {"params", dense_params.size()},
                  {"bytes", done->bytes},
                  {"checksum", done->checksum}};
  }
  if (meta.network.type == dense_model_type::torchscript) {
    // The module as trained (its parameters replaced by dense.bin's), loadable by torch.jit.load
    // as it is; serving reads it back with dense.bin's parameters.
    if (!meta.network.torchscript)
      return make_model_error("export: model.type torchscript without its module");
    auto plugin = torchscript_plugin();
    if (!plugin)
      return make_model_error(plugin.error());
    auto trained =
      (*plugin)->with_params(*meta.network.torchscript, dense_params.data(), dense_params.size());
    if (!trained)
      return make_model_error("export: " + trained.error());
    if (auto w = write_text_atomic(dir / "module.pt", *trained); !w)
      return make_model_error(w.error());
    j["module"] = {{"name", "module.pt"}, {"bytes", trained->size()}};
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
    j["files"].push_back({{"name", fe.name},
                          {"first_partition", fe.first},
                          {"last_partition", fe.last},
                          {"rows", fe.rows},
                          {"bytes", fe.bytes},
                          {"checksum", fe.checksum}});
  }
  j["rows"] = rows;
  if (auto w = write_text_atomic(dir / "MODEL.json", j.dump(2) + "\n"); !w)
    return make_model_error(w.error());
  return rows;
}

}  // namespace satrap
