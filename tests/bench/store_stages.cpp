// Where a store lookup's time goes (issue 17): each stage of a lookup timed alone on the same ids,
// beside the flat gather the store is measured against. Each variant runs over every batch, one
// variant after the other, on this thread's CPU clock; figures are medians (ns per id) over reps x
// batches.
//
// Variants: `hash` (row_index::hash_of only); `index` (the store's index alone, filled with the
// same ids: home bucket prefetched 16 ids ahead, then the whole find, which walks on without a
// prefetch for the ids beyond the home bucket); `index_home` (the same, home bucket only:
// find_home, which answers `more` for those); `rows` (the rows alone:
// row numbers known, rows on huge-page slabs as the store's, prefetched 16 ahead, 64 bytes copied);
// `copy` (the 64-byte copy of rows already in L1); `fp16` (one half row widened to fp32, in L1);
// `flat` and `flat_4k` (the bench's flat gather, 68-byte rows, on huge pages and on 4 KiB pages);
// `store` / `peek` / `store_fp16` (embedding_table::lookup, peek, and lookup of an fp16 table).
// `plain` (the index and the rows as a plain loop, no software prefetch: find, then copy) and
// `rows_plain` (the rows alone, row numbers known, no software prefetch), added 2026-12-05.
// `slots` (added 2026-12-06): the same ids in a slot table (slot_table.hpp: each row beside its
// id, found through a control array of tags that stays in the L3), looked up as the store would:
// hash and prefetch the control line; 16 ids later match the tag and prefetch the slot; 16 ids
// after that check the id, set the CLOCK bit and copy the weights.
// It prints the process's AnonHugePages, so that the flat array and the store are seen on the
// same page size.
// usage: store_stages [rows=10M] [reps=3] [zipf|uniform]
#include "models/embedding/embedding_table.hpp"
#include "models/embedding/huge_pages.hpp"
#include "models/embedding/row_index.hpp"
#include "models/embedding/row_slabs.hpp"
#include "tests/bench/slot_table.hpp"
#include "tests/bench/store_bench_ids.hpp"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace satrap;

namespace {

constexpr int dim = 16;
constexpr size_t batch_ids = 65536, row_floats = dim + 1, ahead = 16;

// The `slots` variant: three stages `ahead` ids apart, run block by block as the store's pipeline
// runs (stage 1 on a block, stage 2 on the block before, stage 3 on the one before that): run id
// by id, the same stages measured 1.3-1.6x slower.
void slot_lookup(slot_table& t, const std::vector<uint64_t>& ids, float* out) {
  constexpr size_t ring = 4 * ahead;
  uint64_t hashes[ring];
  uint32_t slots[ring];
  const size_t n = ids.size();
  for (size_t b = 0; b < n + 2 * ahead; b += ahead) {
    for (size_t i = b; i < std::min(b + ahead, n); ++i) {
      hashes[i % ring] = slot_table::hash_of(ids[i]);
      t.prefetch_home(hashes[i % ring]);
    }
    if (b >= ahead)
      for (size_t j = b - ahead; j < std::min(b, n); ++j) {
        slots[j % ring] = t.candidate(hashes[j % ring]);
        t.prefetch_slot(slots[j % ring], dim * 4);
      }
    if (b >= 2 * ahead)
      for (size_t k = b - 2 * ahead; k < std::min(b - ahead, n); ++k) {
        uint32_t s = slots[k % ring];
        if (t.id_at(s) != ids[k])
          s = t.find(ids[k], hashes[k % ring]);  // a tag of another id
        t.touch(s);
        std::memcpy(out + k * dim, t.row(s), dim * 4);
      }
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t rows = argc > 1 ? std::stoull(argv[1]) : 10'000'000;
  int reps = argc > 2 ? std::stoi(argv[2]) : 3;
  bool uniform = argc > 3 && std::string(argv[3]) == "uniform";
  auto batches = bench::id_batches(rows, 8, batch_ids, 20240611, uniform);

  embedding_options o;
  o.dim = dim;
  o.optimizer = sparse_optimizer_kind::rowwise_adagrad;
  o.capacity = rows;
  embedding_options o16 = o;
  o16.precision = weight_precision::fp16;
  embedding_table store(o), store16(o16);
  row_index index(rows);
  const row_layout layout = row_layout::of(o);
  row_slabs slabs(layout.weight_bytes, 4 * layout.state_floats,
                  row_slabs::rows_per_slab(layout.stride, rows));
  slabs.ensure(rows);
  std::vector<float> out(batch_ids * dim);
  {
    std::vector<uint64_t> ids(batch_ids);
    for (size_t b = 0; b < rows; b += batch_ids) {
      size_t n = std::min(batch_ids, rows - b);
      for (size_t i = 0; i < n; ++i)
        ids[i] = b + i;
      store.lookup({ids.data(), n}, out.data());
      store16.lookup({ids.data(), n}, out.data());
    }
    for (size_t r = 0; r < rows; ++r) {
      index.insert(r, row_index::hash_of(r), static_cast<uint32_t>(r));
      embedding_init_row(o, r, reinterpret_cast<float*>(slabs.weights(static_cast<uint32_t>(r))));
    }
  }
  slot_table slot_rows(layout.stride, rows);
  for (size_t r = 0; r < rows; ++r) {
    uint32_t s = slot_rows.insert(r, slot_table::hash_of(r));
    embedding_init_row(o, r, reinterpret_cast<float*>(slot_rows.row(s)));
    std::memset(slot_rows.row(s) + layout.weight_bytes, 0, layout.stride - layout.weight_bytes);
  }
  auto* flat = static_cast<float*>(huge_alloc(rows * row_floats * 4));
  std::vector<float> flat_4k(rows * row_floats);  // std::vector: 4 KiB pages (no madvise)
  for (size_t r = 0; r < rows; ++r) {
    embedding_init_row(o, r, flat + r * row_floats);
    std::memcpy(&flat_4k[r * row_floats], flat + r * row_floats, row_floats * 4);
  }
  const sparse_kernels& k = sparse_kernels_select(simd_choice::automatic);
  std::vector<uint16_t> half(dim, 0x3c00);

  const char* names[] = {"hash",       "index",   "rows",       "copy", "fp16",
                         "flat",       "flat_4k", "store",      "peek", "store_fp16",
                         "index_home", "plain",   "rows_plain", "slots"};
  constexpr int variants = 14;
  std::vector<double> t[variants];
  double sink = 0;
  // Each variant runs over all batches before the next one starts (8 x 65,536 ids touch more
  // lines than the L3 holds), so no variant finds the previous one's lines in the cache. Until
  // 2026-12-05 the variants took turns on each batch: every variant after the first on a batch
  // read what its predecessor had just brought into the L3 (a batch's buckets and rows are ~8 MiB),
  // and `peek`, `plain`, `index_home` and the standalone loops measured warm against a cold `store`.
  for (int rep = 0; rep < reps; ++rep)
    for (int v = 0; v < variants; ++v)
      for (auto& b : batches) {
        const size_t n = b.size();
        double c0 = bench::thread_cpu_s();
        uint64_t acc = 0;
        switch (v) {
          case 0:
            for (size_t i = 0; i < n; ++i)
              acc += row_index::hash_of(b[i]);
            break;
          case 1:
            for (size_t i = 0; i < n; ++i) {
              if (i + ahead < n)
                index.prefetch(row_index::hash_of(b[i + ahead]));
              acc += index.find(b[i], row_index::hash_of(b[i]));
            }
            break;
          case 2:
            for (size_t i = 0; i < n; ++i) {
              if (i + ahead < n)
                slabs.prefetch_weights(static_cast<uint32_t>(b[i + ahead]));
              std::memcpy(&out[i * dim], slabs.weights(static_cast<uint32_t>(b[i])), dim * 4);
            }
            break;
          case 3:
            for (size_t i = 0; i < n; ++i)
              std::memcpy(&out[(i % 64) * dim], slabs.weights(static_cast<uint32_t>(i % 64)),
                          dim * 4);
            break;
          case 4:
            for (size_t i = 0; i < n; ++i)
              k.to_f32(half.data(), &out[(i % 64) * dim], dim);
            break;
          case 5:
            for (size_t i = 0; i < n; ++i)
              std::memcpy(&out[i * dim], flat + b[i] * row_floats, dim * 4);
            break;
          case 6:
            for (size_t i = 0; i < n; ++i)
              std::memcpy(&out[i * dim], &flat_4k[b[i] * row_floats], dim * 4);
            break;
          case 7: store.lookup(b, out.data()); break;
          case 8: store.peek(b, out.data()); break;
          case 9: store16.lookup(b, out.data()); break;
          case 10:
            for (size_t i = 0; i < n; ++i) {
              if (i + ahead < n)
                index.prefetch(row_index::hash_of(b[i + ahead]));
              acc += index.find_home(b[i], row_index::hash_of(b[i]));
            }
            break;
          case 11:
            for (size_t i = 0; i < n; ++i)
              std::memcpy(&out[i * dim], slabs.weights(index.find(b[i], row_index::hash_of(b[i]))),
                          dim * 4);
            break;
          case 12:
            for (size_t i = 0; i < n; ++i)
              std::memcpy(&out[i * dim], slabs.weights(static_cast<uint32_t>(b[i])), dim * 4);
            break;
          case 13: slot_lookup(slot_rows, b, out.data()); break;
        }
        t[v].push_back((bench::thread_cpu_s() - c0) * 1e9 / static_cast<double>(n));
        sink += static_cast<double>(acc % 7) + out[5];
      }
  std::printf(
    "%s ids, %zu rows, %zu x %zu ids, %d reps, kernels %s; AnonHugePages %zu MiB (flat %zu MiB on huge "
    "pages, store %zu MiB); ns per id, thread CPU time, medians (sink %g):\n",
    uniform ? "uniform" : "zipf", rows, batches.size(), batch_ids, reps, k.name,
    bench::anon_huge_kib() / 1024, rows * row_floats * 4 >> 20,
    static_cast<size_t>(store.counters().bytes >> 20), sink);
  for (int v = 0; v < variants; ++v)
    std::printf("%-10s %7.1f\n", names[v], bench::median(t[v]));
  std::printf(
    "ratios: store/flat %.3f peek/flat %.3f store_fp16/flat %.3f flat_4k/flat %.3f slots/flat %.3f\n",
    bench::median(t[5]) / bench::median(t[7]), bench::median(t[5]) / bench::median(t[8]),
    bench::median(t[5]) / bench::median(t[9]), bench::median(t[5]) / bench::median(t[6]),
    bench::median(t[5]) / bench::median(t[13]));
  std::printf(
    "index_home=%.1f hash=%.1f index=%.1f rows=%.1f copy=%.1f fp16=%.1f flat=%.1f flat_4k=%.1f store=%.1f peek=%.1f "
    "store_fp16=%.1f slots=%.1f\n",
    bench::median(t[10]), bench::median(t[0]), bench::median(t[1]), bench::median(t[2]),
    bench::median(t[3]), bench::median(t[4]), bench::median(t[5]), bench::median(t[6]),
    bench::median(t[7]), bench::median(t[8]), bench::median(t[9]), bench::median(t[13]));
  huge_free(flat, rows * row_floats * 4);
  return 0;
}
