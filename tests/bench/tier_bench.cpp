// The SSD tier against every row in RAM (issue 48's figure): a table `multiple` times the RAM
// budget, every row made first (weights and Adagrad state, dim 16 fp32: 128 bytes a row), then
// batches of Zipf(1.1) ids (distinct within a batch), each looked up and updated with the next
// batch's ids prefetched. Prints rows/s of lookup + update for the tier and for the all-in-RAM
// table in the same go, their ratio, the hit rate, prefetch hits, SSD bytes per looked-up row and
// the tier's RAM (its own count and the process's RSS growth; the tier runs in a child process).
// Usage: tier_bench [budget_mib=256] [multiple=4] [batches=2000] [batch_ids=4096]
//                   [kind=rocksdb|slot_file] [dir=/tmp]
#include "models/tier/tiered_table.hpp"
#include "tests/bench/store_bench_ids.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <malloc.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace satrap;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

size_t rss_kib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  size_t kib = 0;
  while (f && std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %zu kB", &kib) == 1)
      break;
  if (f)
    std::fclose(f);
  return kib;
}

embedding_options bench_options() {  // the default job's rows
  embedding_options o;
  o.dim = 16;
  o.optimizer = sparse_optimizer_kind::adagrad;
  o.learning_rate = 0.3f;
  o.initial_accumulator = 1e-6f;
  o.seed = 1;
  return o;
}

struct outcome {
  double rows_per_s = 0;
  double hit_rate = 0, prefetch_share = 0, ssd_bytes_per_row = 0;
  double ram_mib = 0, rss_growth_mib = 0, fill_s = 0;
};

template <class Table>
outcome train(Table& table, const std::vector<std::vector<uint64_t>>& batches, uint64_t rows) {
  const size_t dim = 16;
  outcome out;
  // Every row made first: the table holds `rows` rows before the timed batches.
  double t0 = now_s();
  std::vector<uint64_t> chunk;
  std::vector<float> buf(65536 * dim);
  for (uint64_t k = 0; k < rows; k += 65536) {
    chunk.clear();
    for (uint64_t id = k; id < std::min<uint64_t>(rows, k + 65536); ++id)
      chunk.push_back(id);
    if constexpr (std::is_same_v<Table, tiered_table>) {
      if (!table.lookup(chunk, buf.data()).ok())
        std::exit(1);
    } else {
      table.lookup(chunk, buf.data());
    }
  }
  if constexpr (std::is_same_v<Table, tiered_table>) {
    if (!table.flush().ok())
      std::exit(1);
  }
  out.fill_s = now_s() - t0;
  std::vector<float> rows_out(batches[0].size() * dim), grads(rows_out.size());
  size_t looked = 0;
  tier_counters before;
  if constexpr (std::is_same_v<Table, tiered_table>)
    before = table.counters();
  t0 = now_s();
  for (size_t b = 0; b < batches.size(); ++b) {
    const auto& ids = batches[b];
    if constexpr (std::is_same_v<Table, tiered_table>) {
      if (b + 1 < batches.size())
        table.prefetch(batches[b + 1]);
      if (!table.lookup(ids, rows_out.data()).ok())
        std::exit(1);
    } else {
      table.lookup(ids, rows_out.data());
    }
    for (size_t i = 0; i < ids.size() * dim; ++i)
      grads[i] = 0.01f * rows_out[i] + 1e-3f * float(int(i % 7) - 3);
    if constexpr (std::is_same_v<Table, tiered_table>) {
      if (!table.update(ids, grads.data()).ok())
        std::exit(1);
    } else {
      table.update(ids, grads.data());
    }
    looked += ids.size();
  }
  out.rows_per_s = double(looked) / (now_s() - t0);
  if constexpr (std::is_same_v<Table, tiered_table>) {
    tier_counters c = table.counters();
    double hits = double(c.hits - before.hits), misses = double(c.misses - before.misses);
    out.hit_rate = hits / (hits + misses);
    out.prefetch_share = double(c.prefetch_hits - before.prefetch_hits) / std::max(1.0, misses);
    out.ssd_bytes_per_row =
      double(c.bytes_read - before.bytes_read + c.bytes_written - before.bytes_written)
      / double(looked);
    out.ram_mib = double(c.ram_bytes) / (1 << 20);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t budget_mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const double multiple = argc > 2 ? std::strtod(argv[2], nullptr) : 4.0;
  const size_t n_batches = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 2000;
  const size_t batch_ids = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 4096;
  const std::string kind_name = argc > 5 ? argv[5] : "rocksdb";
  const std::string root = argc > 6 ? argv[6] : "/tmp";
  const cold_store_kind kind =
    kind_name == "slot_file" ? cold_store_kind::slot_file : cold_store_kind::rocksdb;
  if (!cold_store_available(kind)) {
    std::printf("%s: not compiled in\n", kind_name.c_str());
    return 0;
  }
  const embedding_options options = bench_options();
  const uint64_t budget = budget_mib << 20;
  const size_t stride = row_layout::of(options).stride;
  const auto rows = uint64_t(multiple * double(budget) / double(stride));
  std::printf(
    "tier_bench: budget %llu MiB, table %.1fx = %llu rows (%.0f MiB of rows), %zu batches "
    "of %zu Zipf(1.1) ids, cold store %s\n",
    (unsigned long long)budget_mib, multiple, (unsigned long long)rows,
    double(rows * stride) / (1 << 20), n_batches, batch_ids, kind_name.c_str());
  const auto batches = bench::id_batches(rows, n_batches, batch_ids, 11);
  std::fflush(stdout);

  // The tier in a child process, so its RSS growth is its own.
  int pipe_fd[2];
  if (::pipe(pipe_fd) != 0)
    return 1;
  pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fd[0]);
    const std::string dir = root + "/tier_bench_" + std::to_string(::getpid());
    std::filesystem::remove_all(dir);
    size_t rss0 = rss_kib();
    tier_options t;
    t.kind = tier_kind::ssd;
    t.store = kind;
    t.path = dir;
    t.ram_budget = budget;
    outcome o;
    {
      auto tier = tiered_table::open(options, t);
      if (!tier) {
        std::fprintf(stderr, "%s\n", tier.error().c_str());
        std::_Exit(1);
      }
      o = train(**tier, batches, rows);
      ::malloc_trim(0);  // freed buffers (the fill's) given back: RSS is what the tier holds
      o.rss_growth_mib = double(rss_kib() - rss0) / 1024.0;
    }
    std::filesystem::remove_all(dir);
    if (::write(pipe_fd[1], &o, sizeof o) != ssize_t(sizeof o))
      std::_Exit(1);
    std::_Exit(0);
  }
  ::close(pipe_fd[1]);
  outcome tier;
  bool got = ::read(pipe_fd[0], &tier, sizeof tier) == ssize_t(sizeof tier);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "tier_bench: the tier's run failed\n");
    return 1;
  }
  embedding_table ram(options);
  outcome all = train(ram, batches, rows);
  std::printf("%-22s %12s %9s %10s %14s %9s %9s %8s\n", "run", "rows/s", "hit rate", "prefetched",
              "SSD B/row", "RAM MiB", "RSS+ MiB", "fill s");
  std::printf("%-22s %12.0f %9s %10s %14s %9.0f %9s %8.1f\n", "all rows in RAM", all.rows_per_s,
              "-", "-", "-", double(ram.counters().bytes) / (1 << 20), "-", all.fill_s);
  std::printf("%-22s %12.0f %9.4f %10.3f %14.1f %9.0f %9.0f %8.1f\n", ("tier " + kind_name).c_str(),
              tier.rows_per_s, tier.hit_rate, tier.prefetch_share, tier.ssd_bytes_per_row,
              tier.ram_mib, tier.rss_growth_mib, tier.fill_s);
  std::printf("ratio tier / all in RAM (lookup + update rows/s): %.3f\n",
              tier.rows_per_s / all.rows_per_s);
  return 0;
}
