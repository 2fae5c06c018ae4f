// The SSD tier (models/tier/): the same id stream trained with a tiny RAM budget (rows evicted to
// the cold store and brought back, optimizer state included) and with every row in RAM gives
// bit-identical rows, for both cold stores; prefetch; checkpoint and restore; a write that fails
// (the file size limit: EFBIG) is reported and loses nothing; a missing tier folder.
#include "models/embedding/embedding_table.hpp"
#include "models/tier/cold_store.hpp"
#include "models/tier/tiered_table.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <random>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

using namespace satrap;

namespace {

constexpr uint64_t test_seed = 20261207;

struct temp_dir {
  std::filesystem::path path;
  explicit temp_dir(const char* name)
      : path(std::filesystem::temp_directory_path()
             / ("satrap_tier_" + std::to_string(::getpid()) + "_" + name)) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
  std::string sub(const char* name) const { return (path / name).string(); }
};

embedding_options tier_test_options(sparse_optimizer_kind kind, weight_precision precision) {
  embedding_options o;
  o.dim = 16;
  o.optimizer = kind;
  o.learning_rate = 0.1f;
  o.initial_accumulator = 1e-6f;
  o.init_scale = 0.05f;
  o.seed = test_seed;
  o.precision = precision;
  return o;
}

// Batches of unique ids, skewed (a hot head and a long tail) over `vocab` ids.
std::vector<std::vector<uint64_t>> id_stream(int batches, int per_batch, uint64_t vocab) {
  std::mt19937_64 rng(test_seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<std::vector<uint64_t>> out;
  for (int b = 0; b < batches; ++b) {
    std::vector<uint64_t> ids;
    while (ids.size() < size_t(per_batch)) {
      double x = u(rng);
      uint64_t id = 1000 + static_cast<uint64_t>(double(vocab) * x * x * x);
      if (std::find(ids.begin(), ids.end(), id) == ids.end())
        ids.push_back(id);
    }
    out.push_back(std::move(ids));
  }
  return out;
}

// Gradients that depend on the rows looked up, so any difference in a row shows in later steps.
std::vector<float> grads_of(const std::vector<float>& rows, int step) {
  std::vector<float> g(rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    g[i] = 0.5f * rows[i] - 0.01f * float((i * 7 + size_t(step)) % 13) + 0.03f;
  return g;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Trains `stream` on the reference (every row in RAM) and the tier; rows compared at every step.
void train_both(embedding_table& ref, tiered_table& tier,
                const std::vector<std::vector<uint64_t>>& stream, bool prefetch, int first_step) {
  const size_t dim = size_t(ref.options().dim);
  for (size_t b = 0; b < stream.size(); ++b) {
    const auto& ids = stream[b];
    if (prefetch && b + 1 < stream.size())
      tier.prefetch(stream[b + 1]);
    std::vector<float> a(ids.size() * dim), t(ids.size() * dim);
    ref.lookup(ids, a.data());
    REQUIRE(tier.lookup(ids, t.data()).ok());
    REQUIRE(same_bits(a, t));
    auto g = grads_of(a, first_step + int(b));
    ref.update(ids, g.data());
    REQUIRE(tier.update(ids, g.data()).ok());
  }
}

void check_all_rows(embedding_table& ref, tiered_table& tier, uint64_t vocab) {
  std::vector<uint64_t> all;
  for (uint64_t id = 1000; id <= 1000 + vocab; ++id)
    all.push_back(id);
  const size_t dim = size_t(ref.options().dim);
  std::vector<float> a(all.size() * dim), t(all.size() * dim);
  ref.peek(all, a.data());
  REQUIRE(tier.peek(all, t.data()).ok());
  CHECK(same_bits(a, t));
}

}  // namespace

TEST_CASE("tier: a tiny RAM budget gives the rows of an all-in-RAM table, bit for bit") {
  const uint64_t vocab = 3000;
  const auto stream = id_stream(120, 64, vocab);
  for (auto kind : {cold_store_kind::slot_file, cold_store_kind::rocksdb}) {
    if (!cold_store_available(kind))
      continue;
    for (auto opt : {sparse_optimizer_kind::adagrad, sparse_optimizer_kind::adam,
                     sparse_optimizer_kind::ftrl}) {
      for (auto precision : {weight_precision::fp32, weight_precision::fp16}) {
        CAPTURE(std::string(cold_store_kind_name(kind)));
        CAPTURE(int(opt));
        CAPTURE(int(precision));
        temp_dir dir("bits");
        auto options = tier_test_options(opt, precision);
        embedding_table ref(options);
        tier_options t;
        t.kind = tier_kind::ssd;
        t.store = kind;
        t.path = dir.sub("tier");
        t.ram_budget = 200 * (row_layout::of(options).stride + 16);  // ~170 rows of ~2000 seen
        auto tier = tiered_table::open(options, t);
        REQUIRE(tier.ok());
        const bool prefetch = opt != sparse_optimizer_kind::ftrl;  // and without prefetch
        train_both(ref, **tier, stream, prefetch, 0);
        auto c = (*tier)->counters();
        CHECK(c.ram_rows < 200);
        CHECK((*tier)->size() <= c.ram_rows);
        CHECK((*tier)->ram().counters().evictions > 1000);
        CHECK(c.cold_hits > 1000);  // rows came back from the tier
        CHECK(c.bytes_written > 0);
        if (prefetch)
          CHECK(c.prefetch_hits > c.cold_hits / 2);
        else
          CHECK(c.prefetch_hits == 0);
        check_all_rows(ref, **tier, vocab);  // every row survived eviction and reload
      }
    }
  }
}

TEST_CASE("tier: checkpoint and restore keep every row and its optimizer state") {
  const uint64_t vocab = 3000;
  const auto stream = id_stream(100, 64, vocab);
  const std::vector<std::vector<uint64_t>> first(stream.begin(), stream.begin() + 50);
  const std::vector<std::vector<uint64_t>> second(stream.begin() + 50, stream.end());
  for (auto kind : {cold_store_kind::slot_file, cold_store_kind::rocksdb}) {
    if (!cold_store_available(kind))
      continue;
    CAPTURE(std::string(cold_store_kind_name(kind)));
    temp_dir dir("ckpt");
    auto options = tier_test_options(sparse_optimizer_kind::adagrad, weight_precision::fp32);
    embedding_table ref(options);
    tier_options t;
    t.kind = tier_kind::ssd;
    t.store = kind;
    t.path = dir.sub("tier");
    t.ram_budget = 200 * (row_layout::of(options).stride + 16);
    {
      auto tier = tiered_table::open(options, t);
      REQUIRE(tier.ok());
      train_both(ref, **tier, first, true, 0);
      REQUIRE((*tier)->checkpoint(dir.sub("ckpt")).ok());
      // Training on after the checkpoint (write-backs included) changes the live tier only.
      const size_t dim = 16;
      for (const auto& ids : first) {
        (*tier)->prefetch(ids);
        std::vector<float> x(ids.size() * dim);
        REQUIRE((*tier)->lookup(ids, x.data()).ok());
        auto g = grads_of(x, 7);
        REQUIRE((*tier)->update(ids, g.data()).ok());
      }
      CHECK((*tier)->counters().rows_written > 0);
    }
    // A crash after write-backs that followed the checkpoint: the restored tier is the checkpoint.
    REQUIRE(restore_tier(dir.sub("ckpt"), t.path).ok());
    auto restored = tiered_table::open(options, t);
    REQUIRE(restored.ok());
    CHECK((*restored)->size() == 0);  // RAM starts empty: every row comes from the disk
    check_all_rows(ref, **restored, vocab);
    train_both(ref, **restored, second, true, 50);  // the state came back too: same updates
    check_all_rows(ref, **restored, vocab);
  }
}

TEST_CASE("tier: a write that fails (file size limit) is reported and loses nothing") {
  const uint64_t vocab = 3000;
  const auto stream = id_stream(80, 64, vocab);
  temp_dir dir("efbig");
  auto options = tier_test_options(sparse_optimizer_kind::adagrad, weight_precision::fp32);
  embedding_table ref(options);
  tier_options t;
  t.store = cold_store_kind::slot_file;  // RocksDB turns read-only after a failed flush
  t.path = dir.sub("tier");
  t.ram_budget = 200 * (row_layout::of(options).stride + 16);
  auto tier = tiered_table::open(options, t);
  REQUIRE(tier.ok());
  train_both(ref, **tier, std::vector(stream.begin(), stream.begin() + 20), true, 0);

  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = std::filesystem::file_size(t.path + "/rows.slots");  // no room to grow
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  const size_t dim = 16;
  std::string error;
  size_t b = 20;
  for (; b < 60 && error.empty(); ++b) {  // train until the failed write is reported
    const auto& ids = stream[b];
    std::vector<float> a(ids.size() * dim), x(ids.size() * dim);
    ref.lookup(ids, a.data());
    auto looked = (*tier)->lookup(ids, x.data());
    if (!looked) {
      error = looked.error();
      // The call failed before touching RAM: the lookup is repeated, as the shard would.
      REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
      REQUIRE((*tier)->lookup(ids, x.data()).ok());
    }
    REQUIRE(same_bits(a, x));
    auto g = grads_of(a, int(b));
    ref.update(ids, g.data());
    auto updated = (*tier)->update(ids, g.data());
    if (!updated) {  // the call did nothing: repeated
      error = updated.error();
      REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
      REQUIRE((*tier)->update(ids, g.data()).ok());
    }
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  CHECK(error.find("rows.slots") != std::string::npos);
  CHECK(error.find("File too large") != std::string::npos);
  train_both(ref, **tier, std::vector(stream.begin() + long(b), stream.end()), true, int(b));
  check_all_rows(ref, **tier, vocab);  // the rows of the failed write were kept and written later
}

TEST_CASE("tier: a missing tier folder, a kind not compiled in, eviction none") {
  auto options = tier_test_options(sparse_optimizer_kind::adagrad, weight_precision::fp32);
  tier_options t;
  t.store = cold_store_kind::slot_file;
  t.path = "/nonexistent-satrap-dir/tier";
  t.ram_budget = 1 << 20;
  auto missing = tiered_table::open(options, t);
  REQUIRE(!missing.ok());
  CHECK(missing.bad_input());
  CHECK(missing.error().find("/nonexistent-satrap-dir/tier") != std::string::npos);
  CHECK(missing.error().find("No such file or directory") != std::string::npos);
  if (!cold_store_available(cold_store_kind::rocksdb)) {
    t.store = cold_store_kind::rocksdb;
    auto absent = tiered_table::open(options, t);
    REQUIRE(!absent.ok());
    CHECK(absent.error().find("not compiled in") != std::string::npos);
  }
  options.eviction = eviction_kind::none;
  temp_dir dir("none");
  t.store = cold_store_kind::slot_file;
  t.path = dir.sub("tier");
  auto none = tiered_table::open(options, t);
  REQUIRE(!none.ok());
  CHECK(none.error().find("eviction clock") != std::string::npos);
  CHECK(!restore_tier(dir.sub("no_checkpoint"), t.path).ok());
}
