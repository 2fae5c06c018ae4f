// The SSD tier's cold stores side by side (issue 48): RocksDB (Debian's librocksdb) against the
// slot file (pread / pwrite in place), for the default job's row (dim 16 fp32 + Adagrad state:
// 128 bytes). Phases, each in batches of `batch` ids as the tier issues them: load (every row
// once, new ids), random overwrites (write-back of evicted rows), random reads with the page cache
// of the store's files dropped (posix_fadvise DONTNEED: the disk's random reads), and the same
// reads warm (the files in the page cache). Prints rows/s and each figure's ratio rocksdb /
// slot_file, and the RAM each store holds beside its rows.
// Usage: cold_store_bench [rows=4000000] [batch=512] [dir=/tmp]
#include "models/tier/cold_store.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

using namespace satrap;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void drop_page_cache(const std::string& dir) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file())
      continue;
    int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

uint64_t dir_bytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file())
      n += e.file_size();
  return n;
}

struct figures {
  double load = 0, overwrite = 0, read_cold = 0, read_warm = 0;
  uint64_t ram = 0, disk = 0;
};

figures run(cold_store_kind kind, const std::string& root, uint64_t rows, size_t batch) {
  const size_t stride = 128;
  const std::string dir = root + "/cold_store_bench_" + cold_store_kind_name(kind);
  std::filesystem::remove_all(dir);
  auto opened = open_cold_store(kind, dir, stride);
  if (!opened) {
    std::fprintf(stderr, "%s\n", opened.error().c_str());
    std::exit(1);
  }
  cold_store& store = **opened;
  figures f;
  std::vector<uint64_t> ids(batch);
  std::vector<std::byte> data(batch * stride);
  std::vector<uint8_t> found(batch);
  std::mt19937_64 rng(7);
  auto fill = [&](uint64_t seed) {
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = std::byte(uint8_t(seed + i * 31));
  };
  // Load: ids scattered over 2^40 (hash-like), written once each.
  auto id_of = [](uint64_t k) { return (k * 0x9e3779b97f4a7c15ULL) >> 24; };
  double t0 = now_s();
  for (uint64_t k = 0; k < rows; k += batch) {
    size_t n = size_t(std::min<uint64_t>(batch, rows - k));
    for (size_t i = 0; i < n; ++i)
      ids[i] = id_of(k + i);
    fill(k);
    if (!store.put(std::span(ids.data(), n), data.data()).ok())
      std::exit(1);
  }
  drop_page_cache(dir);  // includes the sync of what was written
  f.load = double(rows) / (now_s() - t0);
  const uint64_t ops = std::min<uint64_t>(rows, 200000);
  t0 = now_s();
  for (uint64_t k = 0; k < ops; k += batch) {
    for (auto& id : ids)
      id = id_of(rng() % rows);
    fill(k + 1);
    if (!store.put(ids, data.data()).ok())
      std::exit(1);
  }
  drop_page_cache(dir);
  f.overwrite = double(ops) / (now_s() - t0);
  f.disk = dir_bytes(dir);
  auto reads = [&](uint64_t n_ops) {
    double t = now_s();
    uint64_t hit = 0;
    for (uint64_t k = 0; k < n_ops; k += batch) {
      for (auto& id : ids)
        id = id_of(rng() % rows);
      if (!store.get(ids, data.data(), found.data()).ok())
        std::exit(1);
      for (auto x : found)
        hit += x;
    }
    if (hit != (n_ops + batch - 1) / batch * batch) {
      std::fprintf(stderr, "%s: %llu of the rows read were missing\n", cold_store_kind_name(kind),
                   (unsigned long long)(n_ops - hit));
      std::exit(1);
    }
    return double(n_ops) / (now_s() - t);
  };
  f.read_cold = reads(std::min<uint64_t>(rows, 50000));
  for (int i = 0; i < 3; ++i)  // warm the page cache (every file read once)
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
      if (e.is_regular_file()) {
        int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
        std::vector<char> buf(1 << 20);
        while (::read(fd, buf.data(), buf.size()) > 0) {}
        ::close(fd);
      }
  f.read_warm = reads(std::min<uint64_t>(rows, 400000));
  f.ram = store.ram_bytes();
  opened->reset();
  std::filesystem::remove_all(dir);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t rows = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 4000000;
  const size_t batch = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 512;
  const std::string root = argc > 3 ? argv[3] : "/tmp";
  std::printf("cold stores: %llu rows of 128 bytes (%.0f MiB), batches of %zu ids, under %s\n",
              (unsigned long long)rows, double(rows) * 128 / (1 << 20), batch, root.c_str());
  figures slot = run(cold_store_kind::slot_file, root, rows, batch);
  std::printf("%-10s %12s %12s %14s %14s %10s %10s\n", "store", "load rows/s", "writes/s",
              "reads/s cold", "reads/s warm", "RAM MiB", "disk MiB");
  auto line = [&](const char* name, const figures& f) {
    std::printf("%-10s %12.0f %12.0f %14.0f %14.0f %10.1f %10.1f\n", name, f.load, f.overwrite,
                f.read_cold, f.read_warm, double(f.ram) / (1 << 20), double(f.disk) / (1 << 20));
  };
  line("slot_file", slot);
  if (!cold_store_available(cold_store_kind::rocksdb)) {
    std::printf("rocksdb: not compiled in (librocksdb-dev)\n");
    return 0;
  }
  figures rdb = run(cold_store_kind::rocksdb, root, rows, batch);
  line("rocksdb", rdb);
  std::printf("ratio rocksdb/slot_file: load %.2f writes %.2f reads cold %.2f reads warm %.2f\n",
              rdb.load / slot.load, rdb.overwrite / slot.overwrite, rdb.read_cold / slot.read_cold,
              rdb.read_warm / slot.read_warm);
  return 0;
}
