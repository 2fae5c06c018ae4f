// Snapshots of the embedding store: full and incremental, restore into other shard counts,
// and corrupted, truncated or unfinished files.
#include "models/embedding/embedding_snapshot.hpp"
#include "models/embedding/id_map.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>
#include <memory>
#include <random>
#include <vector>

using namespace satrap;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t test_seed = 777001;

// A fresh directory per test, removed afterwards.
struct temp_dir {
  fs::path path;
  explicit temp_dir(const char* name)
      : path(fs::temp_directory_path()
             / (std::string("satrap_snap_") + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  std::string str() const { return path.string(); }
};

embedding_options snap_options(sparse_optimizer_kind kind = sparse_optimizer_kind::adam) {
  embedding_options o;
  o.dim = 6;
  o.optimizer = kind;  // Adam: the per-row step count must survive too
  o.learning_rate = 0.05f;
  o.seed = test_seed;
  return o;
}

// The shard that owns id among n.
size_t owner(uint64_t id, size_t n) { return mix64(id) % n; }

// Trains `tables` (shard of id = owner(id, tables.size())) on random ids and gradients.
void train(std::vector<std::unique_ptr<embedding_table>>& tables, uint64_t seed, int steps,
           uint64_t vocab = 500) {
  std::mt19937_64 rng(seed);
  const int dim = tables[0]->options().dim;
  for (int s = 0; s < steps; ++s) {
    for (size_t k = 0; k < tables.size(); ++k) {
      std::vector<uint64_t> ids;
      for (int i = 0; i < 40; ++i) {
        uint64_t id = rng() % vocab;
        if (owner(id, tables.size()) == k && std::find(ids.begin(), ids.end(), id) == ids.end())
          ids.push_back(id);
      }
      std::vector<float> rows(ids.size() * dim), g(ids.size() * dim);
      for (auto& x : g)
        x = std::normal_distribution<float>(0, 1)(rng);
      tables[k]->lookup(ids, rows.data());
      tables[k]->update(ids, g.data());
    }
  }
}

std::vector<std::unique_ptr<embedding_table>> make_shards(size_t n, const embedding_options& o) {
  std::vector<std::unique_ptr<embedding_table>> v;
  for (size_t i = 0; i < n; ++i)
    v.push_back(std::make_unique<embedding_table>(o));
  return v;
}

result<ok_t> write_all(std::vector<std::unique_ptr<embedding_table>>& shards,
                       const std::string& root, uint64_t seq, snapshot_kind kind) {
  std::vector<embedding_table*> raw;
  for (auto& s : shards)
    raw.push_back(s.get());
  return snapshot_write(raw, root, seq, kind);
}

// Every id -> row bytes, over all shards.
std::map<uint64_t, std::vector<std::byte>> contents(
  const std::vector<std::unique_ptr<embedding_table>>& shards) {
  std::map<uint64_t, std::vector<std::byte>> out;
  for (auto& t : shards)
    t->for_each_row(false, [&](uint64_t id, const std::byte* row) {
      CHECK(out.count(id) == 0);
      out[id].assign(row, row + t->layout().stride);
    });
  return out;
}

std::vector<std::unique_ptr<embedding_table>> restore_all(size_t n, const embedding_options& o,
                                                          const std::string& root, uint64_t seq) {
  auto shards = make_shards(n, o);
  for (size_t k = 0; k < n; ++k) {
    auto r =
      snapshot_restore(*shards[k], root, seq, [k, n](uint64_t id) { return owner(id, n) == k; });
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : r.error()));
  }
  return shards;
}

void flip_byte(const fs::path& p, size_t offset_from_start) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset_from_start));
  char c;
  f.read(&c, 1);
  c ^= 0x20;
  f.seekp(static_cast<std::streamoff>(offset_from_start));
  f.write(&c, 1);
}

}  // namespace

TEST_CASE("snapshot: restore gives identical lookups and an identical next update") {
  CAPTURE(test_seed);
  temp_dir dir("roundtrip");
  for (auto prec : {weight_precision::fp32, weight_precision::fp16}) {
    auto o = snap_options();
    o.precision = prec;
    auto shards = make_shards(1, o);
    train(shards, test_seed, 30);
    uint64_t seq = prec == weight_precision::fp32 ? 1 : 2;
    auto w = write_all(shards, dir.str(), seq, snapshot_kind::full);
    REQUIRE_MESSAGE(w.ok(), (w.ok() ? std::string() : w.error()));
    embedding_table back(o);
    auto r = snapshot_restore(back, dir.str(), seq);
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : r.error()));
    CHECK(r->rows_kept == shards[0]->size());
    CHECK(back.size() == shards[0]->size());
    std::vector<uint64_t> ids(600);
    for (size_t i = 0; i < ids.size(); ++i)
      ids[i] = i;  // seen and unseen ids
    std::vector<float> a(ids.size() * o.dim), b(ids.size() * o.dim);
    shards[0]->peek(ids, a.data());
    back.peek(ids, b.data());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
    std::vector<float> g(ids.size() * o.dim, 0.3f);
    shards[0]->update(ids, g.data());
    back.update(ids, g.data());
    shards[0]->peek(ids, a.data());
    back.peek(ids, b.data());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);  // Adam step counts came back too
  }
}

TEST_CASE("snapshot: an incremental chain restores the latest state and only writes changes") {
  CAPTURE(test_seed);
  temp_dir dir("chain");
  auto o = snap_options(sparse_optimizer_kind::rowwise_adagrad);
  o.capacity = 150;  // evictions between snapshots must be replayed as deletions
  auto shards = make_shards(2, o);
  train(shards, test_seed, 20);
  REQUIRE(write_all(shards, dir.str(), 1, snapshot_kind::full).ok());
  for (uint64_t seq = 2; seq <= 4; ++seq) {
    train(shards, test_seed + seq, 5, 2000);
    size_t changed = shards[0]->changed_rows() + shards[1]->changed_rows();
    REQUIRE(write_all(shards, dir.str(), seq, snapshot_kind::incremental).ok());
    CHECK(shards[0]->changed_rows() == 0);
    CHECK(changed < shards[0]->size() + shards[1]->size() + 400);
  }
  CHECK(shards[0]->counters().evictions > 0);
  auto back = restore_all(2, o, dir.str(), 4);
  CHECK(contents(back) == contents(shards));
  auto mid = restore_all(2, o, dir.str(), 2);  // an older point of the chain is still whole
  CHECK(mid[0]->size() + mid[1]->size() > 0);
  CHECK(snapshot_list(dir.str()) == std::vector<uint64_t>{1, 2, 3, 4});
}

TEST_CASE("snapshot: 4 shards restore into 3 (resharding) with every row in exactly one shard") {
  CAPTURE(test_seed);
  temp_dir dir("reshard");
  auto o = snap_options(sparse_optimizer_kind::adagrad);
  auto four = make_shards(4, o);
  train(four, test_seed, 20);
  REQUIRE(write_all(four, dir.str(), 1, snapshot_kind::full).ok());
  train(four, test_seed + 1, 5);
  REQUIRE(write_all(four, dir.str(), 2, snapshot_kind::incremental).ok());
  auto three = restore_all(3, o, dir.str(), 2);
  CHECK(contents(three) == contents(four));
  // and the three carry on: an incremental of theirs chains onto the four's snapshots
  train(three, test_seed + 2, 3);
  REQUIRE(write_all(three, dir.str(), 3, snapshot_kind::incremental).ok());
  auto again = restore_all(3, o, dir.str(), 3);
  CHECK(contents(again) == contents(three));
}

TEST_CASE(
  "snapshot: corrupted, truncated and unfinished snapshots are refused with the file named") {
  CAPTURE(test_seed);
  temp_dir dir("corrupt");
  auto o = snap_options();
  auto shards = make_shards(2, o);
  train(shards, test_seed, 10);
  REQUIRE(write_all(shards, dir.str(), 1, snapshot_kind::full).ok());
  fs::path snap = snapshot_dir(dir.str(), 1), shard1 = snap / "shard-1.snap";
  auto original = fs::file_size(shard1);
  auto try_restore = [&](uint64_t seq) {
    embedding_table t(o);
    auto r = snapshot_restore(t, dir.str(), seq);
    if (r.ok())
      return std::string("ok");
    CHECK(t.size() == 0);  // nothing half-loaded
    return r.error();
  };
  CHECK(try_restore(1) == "ok");

  fs::copy_file(shard1, dir.path / "keep");
  fs::copy_file(snap / "MANIFEST", dir.path / "keep_manifest");
  flip_byte(shard1, original / 2);
  auto e = try_restore(1);
  CHECK(e.find("shard-1.snap") != std::string::npos);
  CHECK(e.find("corrupted") != std::string::npos);

  fs::copy_file(dir.path / "keep", shard1, fs::copy_options::overwrite_existing);
  fs::resize_file(shard1, original - 40);
  e = try_restore(1);
  CHECK(e.find("shard-1.snap") != std::string::npos);
  CHECK(e.find("truncated") != std::string::npos);

  fs::copy_file(dir.path / "keep", shard1, fs::copy_options::overwrite_existing);
  flip_byte(snap / "MANIFEST", 20);
  e = try_restore(1);
  CHECK(e.find("MANIFEST") != std::string::npos);
  CHECK(e.find("corrupted") != std::string::npos);

  // A snapshot whose manifest was never written (a crash between shard files and manifest).
  REQUIRE(snapshot_write_shard(*shards[0], dir.str(), 2, 0, snapshot_kind::full).ok());
  e = try_restore(2);
  CHECK(e.find("no MANIFEST") != std::string::npos);
  CHECK(snapshot_list(dir.str()) == std::vector<uint64_t>{1});

  // Rows of another shape are refused rather than misread.
  auto other = o;
  other.optimizer = sparse_optimizer_kind::sgd;
  fs::copy_file(dir.path / "keep_manifest", snap / "MANIFEST",
                fs::copy_options::overwrite_existing);
  embedding_table t(other);
  auto r = snapshot_restore(t, dir.str(), 1);
  REQUIRE(!r.ok());
  CHECK(r.error().find("the table expects") != std::string::npos);
}
