// Writes the seed corpora of the payload fuzz targets (payload_fuzz.cpp): for each decoder a few
// well-formed messages that pass its checks and a few that each fail one check, behind the
// 8-byte expectations header. Run once when the schemas change:
//   satrap_fuzz_payload_seeds tests/fuzz/corpus
// Threading: a program.
#include "runtime/payload.hpp"
#include "satrap_schemas/snapshot.capnp.h"
#include "satrap_schemas/step.capnp.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace satrap;

struct header {
  uint8_t dim, slots, count, variant;
  int32_t batch;
};

void write(const fs::path& dir, const std::string& name, header h, const capnp_payload& p) {
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&h), sizeof h);
  out.write(p.bytes.data(), static_cast<std::streamsize>(p.bytes.size()));
}

template <class T>
capnp::Data::Reader blob(const std::vector<T>& xs) {
  return data_of(xs);
}

// dim, slots and size as the header encodes them (dim = 1 + byte % 16, slots = 1 + byte % 8).
capnp_payload id_batch(uint32_t size, uint32_t slots, std::vector<uint32_t> offsets,
                       std::vector<uint64_t> ids) {
  capnp::MallocMessageBuilder mb;
  auto m = mb.initRoot<schema::IdBatch>();
  m.setBatch(5);
  m.setSize(size);
  m.setSlots(slots);
  m.setOffsets(blob(offsets));
  m.setIds(blob(ids));
  return payload_encode(mb);
}

capnp_payload lookup(std::vector<uint64_t> ids, bool read_only) {
  capnp::MallocMessageBuilder mb;
  auto m = mb.initRoot<schema::LookupRequest>();
  m.setBatch(3);
  m.setReadOnly(read_only);
  m.setIds(blob(ids));
  return payload_encode(mb);
}

capnp_payload rows(int64_t batch, uint32_t dim, size_t n) {
  capnp::MallocMessageBuilder mb;
  auto m = mb.initRoot<schema::EmbeddingRows>();
  m.setBatch(batch);
  m.setDim(dim);
  m.setRows(blob(std::vector<float>(n * dim, 0.25f)));
  return payload_encode(mb);
}

template <class S>
capnp_payload pooled(int64_t batch, uint32_t size, uint32_t slots, uint32_t dim, size_t values) {
  capnp::MallocMessageBuilder mb;
  auto m = mb.initRoot<S>();
  m.setBatch(batch);
  m.setSize(size);
  m.setSlots(slots);
  m.setDim(dim);
  m.setValues(blob(std::vector<float>(values, -1.5f)));
  return payload_encode(mb);
}

capnp_payload emb_grads(uint32_t dim, size_t ids, size_t grads) {
  capnp::MallocMessageBuilder mb;
  auto m = mb.initRoot<schema::EmbeddingGradients>();
  m.setBatch(9);
  m.setDim(dim);
  std::vector<uint64_t> v(ids);
  for (size_t i = 0; i < ids; ++i)
    v[i] = i * 7919;
  m.setIds(blob(v));
  m.setGrads(blob(std::vector<float>(grads, 0.125f)));
  return payload_encode(mb);
}

capnp_payload dense_state(int64_t step, size_t params, size_t m_count, size_t v_count) {
  capnp::MallocMessageBuilder mb;
  auto m = mb.initRoot<schema::DenseState>();
  m.setStep(step);
  m.setOptimizerSteps(step);
  m.setParams(blob(std::vector<float>(params, 0.5f)));
  m.setM(blob(std::vector<float>(m_count, 0.01f)));
  m.setV(blob(std::vector<float>(v_count, 0.02f)));
  return payload_encode(mb);
}

capnp_payload manifest(uint64_t seq, uint64_t parent, uint32_t dim,
                       std::vector<std::string> names) {
  capnp::MallocMessageBuilder mb;
  auto m = mb.initRoot<schema::SnapshotManifest>();
  m.setSequence(seq);
  m.setParent(parent);
  auto f = m.initFormat();
  f.setDim(dim);
  f.setOptimizer("adagrad");
  f.setPrecision("fp32");
  f.setRowBytes(dim * 8);
  auto files = m.initFiles(static_cast<unsigned>(names.size()));
  for (unsigned i = 0; i < names.size(); ++i) {
    files[i].setName(names[i]);
    files[i].setShard(i);
    files[i].setRows(100 + i);
    files[i].setBytes(4096 + i);
    files[i].setChecksum(0x1234567890abcdefull + i);
  }
  return payload_encode(mb);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT (e.g. tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  fs::path root = argv[1];
  // dim byte 3 -> dim 4; slots byte 2 -> slots 3.
  auto d = root / "payload_id_batch";
  write(d, "valid_2x3", {3, 2, 0, 0, 5},
        id_batch(2, 3, {0, 1, 3, 3, 4, 6, 7}, {1, 2, 3, 1, 9, 9, 4}));
  write(d, "valid_empty_bags", {0, 0, 0, 0, 5}, id_batch(3, 1, {0, 0, 0, 0}, {}));
  write(d, "offsets_go_down", {3, 2, 0, 0, 5}, id_batch(1, 3, {0, 2, 1, 3}, {1, 2, 3}));
  write(d, "offsets_past_ids", {3, 2, 0, 0, 5}, id_batch(1, 3, {0, 1, 2, 9}, {1, 2, 3}));
  write(d, "wrong_slots", {3, 0, 0, 0, 5}, id_batch(1, 3, {0, 1, 2, 3}, {1, 2, 3}));
  d = root / "payload_lookup_request";
  write(d, "valid", {0, 0, 0, 0, 3}, lookup({1, 2, 3, 0xffffffffffffffffull}, false));
  write(d, "valid_read_only", {0, 0, 0, 0, 3}, lookup({42}, true));
  write(d, "empty", {0, 0, 0, 0, 3}, lookup({}, false));
  d = root / "payload_embedding_rows";
  write(d, "valid", {3, 0, 5, 0, 8}, rows(8, 4, 5));
  write(d, "too_few_rows", {3, 0, 5, 0, 8}, rows(8, 4, 4));
  write(d, "wrong_dim", {3, 0, 5, 0, 8}, rows(8, 5, 4));
  write(d, "wrong_batch", {3, 0, 5, 0, 8}, rows(9, 4, 5));
  d = root / "payload_pooled";
  write(d, "valid", {3, 2, 2, 0, 11}, pooled<schema::PooledEmbeddings>(11, 2, 3, 4, 24));
  write(d, "valid_any_size", {3, 2, 0, 0, 11}, pooled<schema::PooledEmbeddings>(11, 5, 3, 4, 60));
  write(d, "short_values", {3, 2, 2, 0, 11}, pooled<schema::PooledEmbeddings>(11, 2, 3, 4, 23));
  write(d, "wrong_slots", {3, 2, 2, 0, 11}, pooled<schema::PooledEmbeddings>(11, 2, 4, 4, 32));
  d = root / "payload_gradients";
  write(d, "pooled_valid", {3, 2, 2, 0, 11}, pooled<schema::PooledGradients>(11, 2, 3, 4, 24));
  write(d, "pooled_short", {3, 2, 2, 0, 11}, pooled<schema::PooledGradients>(11, 2, 3, 4, 20));
  write(d, "embedding_valid", {3, 0, 0, 1, 9}, emb_grads(4, 6, 24));
  write(d, "embedding_short", {3, 0, 0, 1, 9}, emb_grads(4, 6, 23));
  d = root / "payload_dense_state";
  write(d, "valid_adam", {0, 0, 10, 0, 0}, dense_state(17, 10, 10, 10));
  write(d, "valid_sgd", {0, 0, 3, 0, 0}, dense_state(0, 3, 0, 0));
  write(d, "wrong_params", {0, 0, 10, 0, 0}, dense_state(17, 9, 9, 9));
  write(d, "negative_step", {0, 0, 3, 0, 0}, dense_state(-1, 3, 0, 0));
  d = root / "payload_snapshot_manifest";
  write(d, "valid_full", {0, 0, 0, 0, 0}, manifest(1, 0, 8, {"shard-0.snap", "shard-1.snap"}));
  write(d, "valid_incremental", {0, 0, 0, 0, 0}, manifest(4, 3, 16, {"shard-0.snap"}));
  write(d, "path_escape", {0, 0, 0, 0, 0}, manifest(2, 0, 8, {"../../etc/passwd"}));
  write(d, "parent_newer", {0, 0, 0, 0, 0}, manifest(2, 5, 8, {"shard-0.snap"}));
  write(d, "twice", {0, 0, 0, 0, 0}, manifest(2, 1, 8, {"shard-0.snap", "shard-0.snap"}));
  return 0;
}
