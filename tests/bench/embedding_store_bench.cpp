// Benchmark of the embedding store (issue 3): lookups/s and updates/s as a fraction of a flat
// array's gather / scatter of the same ids (the memory limit: no index at all), bytes per row
// relative to the payload, and the same figures for std::unordered_map and absl::flat_hash_map
// (a Swiss table: the strongest general-purpose hash map at hand) as baselines the store must beat.
//
// Defaults: 10M rows, dim 16, fp32, row-wise Adagrad (payload 68 bytes per row), Zipf(1.1) ids
// (ranks scattered over the id space) in batches of 65,536 distinct ids (the shard sees de-duplicated
// ids). The four stores run interleaved, rep after rep; figures are medians over reps. Each phase is
// timed twice: wall clock (the `*_ratio` keys) and this thread's CPU time (the `cpu_*` keys), which
// leaves out the time other processes hold the core: on a shared, loaded machine the CPU-time
// ratios are the steadier ones.
// Usage: embedding_store_bench [rows] [batches] [reps] [simd: auto|scalar]
// Last line: key=value pairs, among them lookup_ratio=, update_ratio=, bytes_ratio=, and
// first_lookup_ratio= (rep 0's lookups alone: the first time the batches' ids are looked up after
// the fill, when the store's index moves the ids it finds past their home bucket into it, see
// row_index::find_touch_promote; the medians are over all reps, this one included).
#include "models/embedding/embedding_table.hpp"
#include "models/embedding/huge_pages.hpp"
#include "tests/bench/store_bench_ids.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <time.h>

#ifdef SATRAP_BENCH_ABSL
#include <absl/container/flat_hash_map.h>
#endif

using namespace satrap;

namespace {

constexpr int dim = 16;
constexpr size_t batch_ids = 65536;
constexpr size_t row_floats = dim + 1;  // weights + the row-wise Adagrad accumulator

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Resident bytes of the process: what the allocations really cost in memory.
size_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long pages = 0, resident = 0;
  if (f) {
    if (std::fscanf(f, "%lu %lu", &pages, &resident) != 2)
      resident = 0;
    std::fclose(f);
  }
  return resident * 4096;
}

// Batches of distinct ids: Zipf(1.1) ranks by inverse CDF, scattered by an affine bijection.
std::vector<std::vector<uint64_t>> make_batches(size_t rows, size_t batches, uint64_t seed) {
  size_t draws = 0;
  auto out = bench::id_batches(rows, batches, batch_ids, seed, false, &draws);
  std::printf("batches: %zu x %zu distinct ids from %zu Zipf(1.1) draws\n", batches, batch_ids,
              draws);
  return out;
}

struct timing {
  std::vector<double> lookup_s, update_s, lookup_cpu_s, update_cpu_s;
};

// The flat array gets huge pages too, as the store's slabs do: the ratio then measures the index
// and the row indirection, not the page size.
struct flat_store {
  explicit flat_store(size_t n, const sparse_kernels* kernels, step_params params)
      : rows(static_cast<float*>(huge_alloc(n * row_floats * sizeof(float)))),
        k(kernels),
        p(params),
        n_(n) {}
  ~flat_store() { huge_free(rows, n_ * row_floats * sizeof(float)); }
  float* rows;
  const sparse_kernels* k;
  step_params p;
  size_t n_;
  void lookup(const std::vector<uint64_t>& ids, float* out) const {
    for (size_t i = 0; i < ids.size(); ++i)
      std::memcpy(out + i * dim, &rows[ids[i] * row_floats], dim * 4);
  }
  void update(const std::vector<uint64_t>& ids, const float* g) {
    for (size_t i = 0; i < ids.size(); ++i) {
      float* r = &rows[ids[i] * row_floats];
      k->step(p, r, r + dim, g + i * dim);
    }
  }
};

struct row_struct {
  float v[row_floats];
};

template <class Map>
struct map_store {
  Map map;
  const sparse_kernels* k;
  step_params p;
  void lookup(const std::vector<uint64_t>& ids, float* out) const {
    for (size_t i = 0; i < ids.size(); ++i)
      std::memcpy(out + i * dim, map.find(ids[i])->second.v, dim * 4);
  }
  void update(const std::vector<uint64_t>& ids, const float* g) {
    for (size_t i = 0; i < ids.size(); ++i) {
      float* r = map.find(ids[i])->second.v;
      k->step(p, r, r + dim, g + i * dim);
    }
  }
};

template <class S>
void run_once(S& s, const std::vector<std::vector<uint64_t>>& batches, const std::vector<float>& g,
              std::vector<float>& out, timing& t, double& checksum) {
  double t0 = now_s(), c0 = bench::thread_cpu_s();
  for (auto& b : batches) {
    s.lookup(b, out.data());
    checksum += out[7];
  }
  double t1 = now_s(), c1 = bench::thread_cpu_s();
  for (auto& b : batches)
    s.update(b, g.data());
  double t2 = now_s(), c2 = bench::thread_cpu_s();
  t.lookup_s.push_back(t1 - t0);
  t.update_s.push_back(t2 - t1);
  t.lookup_cpu_s.push_back(c1 - c0);
  t.update_cpu_s.push_back(c2 - c1);
}

}  // namespace

int main(int argc, char** argv) {
  size_t rows = argc > 1 ? std::stoull(argv[1]) : 10'000'000;
  size_t nbatches = argc > 2 ? std::stoull(argv[2]) : 8;
  int reps = argc > 3 ? std::stoi(argv[3]) : 5;
  bool scalar = argc > 4 && std::string(argv[4]) == "scalar";

  embedding_options o;
  o.dim = dim;
  o.optimizer = sparse_optimizer_kind::rowwise_adagrad;
  o.learning_rate = 0.01f;
  o.capacity = rows;
  o.simd = scalar ? simd_choice::scalar : simd_choice::automatic;
  const double payload = dim * 4 + 4;

  auto batches = make_batches(rows, nbatches, 20240611);
  std::vector<float> g(batch_ids * dim), out(batch_ids * dim);
  std::mt19937 grng(7);
  for (auto& x : g)
    x = std::normal_distribution<float>(0.0f, 0.01f)(grng);

  size_t h0 = resident_bytes();
  double t0 = now_s();
  embedding_table store(o);
  {
    std::vector<uint64_t> ids(batch_ids);
    for (size_t b = 0; b < rows; b += batch_ids) {
      size_t n = std::min(batch_ids, rows - b);
      for (size_t i = 0; i < n; ++i)
        ids[i] = b + i;
      store.lookup({ids.data(), n}, out.data());
    }
  }
  double fill_store = now_s() - t0;
  size_t store_rss = resident_bytes() - h0;
  auto c = store.counters();

  flat_store flat(rows, &sparse_kernels_select(o.simd), step_params::of(o));
  for (size_t r = 0; r < rows; ++r)
    embedding_init_row(o, r, &flat.rows[r * row_floats]);

  auto fill_map = [&](auto& m, double& seconds) {
    size_t before = resident_bytes();
    double start = now_s();
    m.map.reserve(rows);
    for (size_t r = 0; r < rows; ++r) {
      row_struct rs{};
      embedding_init_row(o, r, rs.v);
      m.map.emplace(r, rs);
    }
    seconds = now_s() - start;
    return resident_bytes() - before;
  };
  double fill_umap = 0, fill_absl = 0;
  map_store<std::unordered_map<uint64_t, row_struct>> umap{{}, flat.k, flat.p};
  size_t map_rss = fill_map(umap, fill_umap);
#ifdef SATRAP_BENCH_ABSL
  map_store<absl::flat_hash_map<uint64_t, row_struct>> amap{{}, flat.k, flat.p};
  size_t absl_rss = fill_map(amap, fill_absl);
#endif

  std::printf(
    "store: %zu rows, kernels %s, %llu bytes (%.1f per row, payload %.0f), filled in %.2f s\n",
    store.size(), store.kernels_name(), (unsigned long long)c.bytes, double(c.bytes) / rows,
    payload, fill_store);
  std::printf("unordered_map: %zu rows, %zu resident bytes (%.1f per row), filled in %.2f s\n",
              umap.map.size(), map_rss, double(map_rss) / rows, fill_umap);
#ifdef SATRAP_BENCH_ABSL
  std::printf(
    "absl::flat_hash_map: %zu rows, %zu resident bytes (%.1f per row), filled in %.2f s\n",
    amap.map.size(), absl_rss, double(absl_rss) / rows, fill_absl);
#endif

  timing tf, ts, tm, ta;
  double sink = 0;
  for (int r = 0; r < reps; ++r) {  // interleaved: each rep runs all of them on the same ids
    run_once(flat, batches, g, out, tf, sink);
    run_once(store, batches, g, out, ts, sink);
    run_once(umap, batches, g, out, tm, sink);
#ifdef SATRAP_BENCH_ABSL
    run_once(amap, batches, g, out, ta, sink);
#endif
    std::printf(
      "rep %d cpu ms: lookup flat %.1f store %.1f umap %.1f absl %.1f | update flat %.1f store %.1f "
      "umap %.1f absl %.1f\n",
      r, 1e3 * tf.lookup_cpu_s.back(), 1e3 * ts.lookup_cpu_s.back(), 1e3 * tm.lookup_cpu_s.back(),
      ta.lookup_cpu_s.empty() ? 0.0 : 1e3 * ta.lookup_cpu_s.back(), 1e3 * tf.update_cpu_s.back(),
      1e3 * ts.update_cpu_s.back(), 1e3 * tm.update_cpu_s.back(),
      ta.update_cpu_s.empty() ? 0.0 : 1e3 * ta.update_cpu_s.back());
  }
  const double ids_per_rep = double(nbatches) * batch_ids;
  auto rate = [&](const std::vector<double>& s) {
    return s.empty() ? 0.0 : ids_per_rep / bench::median(s);
  };
  double fl = rate(tf.lookup_s), fu = rate(tf.update_s), sl = rate(ts.lookup_s),
         su = rate(ts.update_s), ml = rate(tm.lookup_s), mu = rate(tm.update_s),
         al = rate(ta.lookup_s), au = rate(ta.update_s);
  double cfl = rate(tf.lookup_cpu_s), cfu = rate(tf.update_cpu_s), csl = rate(ts.lookup_cpu_s),
         csu = rate(ts.update_cpu_s), cml = rate(tm.lookup_cpu_s), cmu = rate(tm.update_cpu_s),
         cal = rate(ta.lookup_cpu_s), cau = rate(ta.update_cpu_s);
  std::printf("%-20s %14s %14s %14s %14s\n", "", "lookups/s", "updates/s", "lookups/cpu-s",
              "updates/cpu-s");
  std::printf("%-20s %14.3e %14.3e %14.3e %14.3e\n", "flat array", fl, fu, cfl, cfu);
  std::printf("%-20s %14.3e %14.3e %14.3e %14.3e\n", "store", sl, su, csl, csu);
  std::printf("%-20s %14.3e %14.3e %14.3e %14.3e\n", "unordered_map", ml, mu, cml, cmu);
  std::printf("%-20s %14.3e %14.3e %14.3e %14.3e\n", "absl::flat_hash_map", al, au, cal, cau);
  std::printf(
    "(checksum %g; bytes_ratio counts the store's own allocations, store_rss_bytes_ratio, "
    "umap_bytes_ratio and absl_bytes_ratio are resident-memory deltas)\n",
    sink);
#ifndef SATRAP_BENCH_ABSL
  std::printf("absl::flat_hash_map: not built (install libabsl-dev: ops/setup.sh)\n");
  const size_t absl_rss = 0;
#endif
  std::printf(
    "rows=%zu dim=%d batch=%zu batches=%zu reps=%d kernels=%s flat_lookups_per_s=%.4g "
    "flat_updates_per_s=%.4g store_lookups_per_s=%.4g store_updates_per_s=%.4g "
    "umap_lookups_per_s=%.4g umap_updates_per_s=%.4g absl_lookups_per_s=%.4g absl_updates_per_s=%.4g "
    "lookup_ratio=%.3f update_ratio=%.3f bytes_ratio=%.3f store_rss_bytes_ratio=%.3f "
    "umap_lookup_ratio=%.3f umap_update_ratio=%.3f umap_bytes_ratio=%.3f "
    "absl_lookup_ratio=%.3f absl_update_ratio=%.3f absl_bytes_ratio=%.3f "
    "cpu_lookup_ratio=%.3f cpu_update_ratio=%.3f cpu_umap_lookup_ratio=%.3f cpu_umap_update_ratio=%.3f "
    "cpu_absl_lookup_ratio=%.3f cpu_absl_update_ratio=%.3f first_lookup_ratio=%.3f\n",
    rows, dim, batch_ids, nbatches, reps, store.kernels_name(), fl, fu, sl, su, ml, mu, al, au,
    sl / fl, su / fu, double(c.bytes) / (rows * payload), double(store_rss) / (rows * payload),
    ml / fl, mu / fu, double(map_rss) / (rows * payload), al / fl, au / fu,
    double(absl_rss) / (rows * payload), csl / cfl, csu / cfu, cml / cfl, cmu / cfu, cal / cfl,
    cau / cfu, tf.lookup_s.empty() ? 0.0 : tf.lookup_s[0] / ts.lookup_s[0]);
  return 0;
}
