// open_cold_store and the rocksdb cold store (cold_store.hpp); the slot file is in
// cold_store_slot_file.cpp.
#include "models/tier/cold_store.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <vector>

#ifdef SATRAP_HAVE_ROCKSDB
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>
#endif

namespace satrap {

result<std::unique_ptr<cold_store>> open_slot_file_store(const std::string& dir, size_t stride);

namespace {

#ifdef SATRAP_HAVE_ROCKSDB
constexpr uint64_t block_cache_max = uint64_t{8} << 20;    // counted in ram_bytes
constexpr uint64_t write_buffer_max = uint64_t{16} << 20;  // one memtable

void key_of(uint64_t id, char* key) {  // big-endian: ids sort as numbers
  for (int b = 0; b < 8; ++b)
    key[b] = static_cast<char>(id >> (56 - 8 * b));
}

class rocksdb_store final : public cold_store {
 public:
  rocksdb_store(size_t stride, std::unique_ptr<rocksdb::DB> db, std::string dir,
                std::shared_ptr<rocksdb::Cache> cache)
      : cold_store(stride), db_(std::move(db)), dir_(std::move(dir)), cache_(std::move(cache)) {
    write_.disableWAL = true;  // durability is the checkpoint's (it flushes first)
  }

  result<ok_t> get(std::span<const uint64_t> ids, std::byte* rows, uint8_t* found) override {
    const size_t n = ids.size();
    keys_.resize(n * 8);
    std::vector<rocksdb::Slice> keys(n);
    for (size_t i = 0; i < n; ++i) {
      key_of(ids[i], &keys_[i * 8]);
      keys[i] = rocksdb::Slice(&keys_[i * 8], 8);
    }
    std::vector<rocksdb::PinnableSlice> values(n);
    std::vector<rocksdb::Status> statuses(n);
    db_->MultiGet(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), n, keys.data(), values.data(),
                  statuses.data());
    for (size_t i = 0; i < n; ++i) {
      found[i] = statuses[i].ok();
      if (statuses[i].IsNotFound())
        continue;
      if (!statuses[i].ok())
        return make_model_error(dir_ + ": reading a row from RocksDB: " + statuses[i].ToString());
      if (values[i].size() != stride_)
        return make_model_error(dir_ + ": a row of " + std::to_string(values[i].size())
                                + " bytes, expected " + std::to_string(stride_));
      std::memcpy(rows + i * stride_, values[i].data(), stride_);
      ++counters_.found;
      counters_.bytes_read += stride_;
    }
    counters_.asked += n;
    return ok_t{};
  }

  result<ok_t> put(std::span<const uint64_t> ids, const std::byte* rows) override {
    rocksdb::WriteBatch batch;
    char key[8];
    for (size_t i = 0; i < ids.size(); ++i) {
      key_of(ids[i], key);
      batch.Put(rocksdb::Slice(key, 8),
                rocksdb::Slice(reinterpret_cast<const char*>(rows + i * stride_), stride_));
    }
    rocksdb::Status s = db_->Write(write_, &batch);
    if (!s.ok())
      return make_model_error(dir_ + ": writing rows to RocksDB: " + s.ToString());
    counters_.rows_written += ids.size();
    counters_.bytes_written += ids.size() * stride_;
    return ok_t{};
  }

  result<ok_t> checkpoint(const std::string& dir) override {
    rocksdb::Checkpoint* raw = nullptr;
    rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &raw);
    std::unique_ptr<rocksdb::Checkpoint> cp(raw);
    if (s.ok())  // log_size_for_flush 0: the memtable is flushed into the linked files
      s = cp->CreateCheckpoint(dir, 0);
    if (!s.ok())
      return make_model_error(dir + ": RocksDB checkpoint: " + s.ToString());
    return ok_t{};
  }

  uint64_t ram_bytes() const override {
    uint64_t mem = 0, readers = 0;
    db_->GetIntProperty("rocksdb.cur-size-all-mem-tables", &mem);
    db_->GetIntProperty("rocksdb.estimate-table-readers-mem", &readers);
    return mem + readers + cache_->GetUsage();
  }

 private:
  std::unique_ptr<rocksdb::DB> db_;
  std::string dir_;
  std::shared_ptr<rocksdb::Cache> cache_;
  rocksdb::WriteOptions write_;
  std::vector<char> keys_;
};

result<std::unique_ptr<cold_store>> open_rocksdb_store(const std::string& dir, size_t stride,
                                                       uint64_t ram_budget) {
  const uint64_t budget = ram_budget == 0 ? ~uint64_t{0} : ram_budget;
  const uint64_t write_buffer = std::clamp(budget / 32, uint64_t{1} << 20, write_buffer_max);
  const uint64_t block_cache = std::clamp(budget / 64, uint64_t{1} << 20, block_cache_max);
  rocksdb::Options options;
  options.create_if_missing = true;
  options.compression = rocksdb::kNoCompression;
  options.write_buffer_size = write_buffer;
  options.max_write_buffer_number = 2;
  options.max_background_jobs = 2;
  options.max_open_files = 512;
  rocksdb::BlockBasedTableOptions table;
  auto cache = rocksdb::NewLRUCache(block_cache);
  table.block_cache = cache;
  table.block_size = 4096;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.cache_index_and_filter_blocks = false;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &raw);
  if (!s.ok())
    return make_model_error(dir + ": opening the tier's RocksDB: " + s.ToString());
  return std::unique_ptr<cold_store>(
    std::make_unique<rocksdb_store>(stride, std::unique_ptr<rocksdb::DB>(raw), dir, cache));
}
#endif

}  // namespace

const char* cold_store_kind_name(cold_store_kind kind) {
  return kind == cold_store_kind::rocksdb ? "rocksdb" : "slot_file";
}

bool cold_store_available(cold_store_kind kind) {
#ifdef SATRAP_HAVE_ROCKSDB
  (void)kind;
  return true;
#else
  return kind != cold_store_kind::rocksdb;
#endif
}

result<std::unique_ptr<cold_store>> open_cold_store(cold_store_kind kind, const std::string& dir,
                                                    size_t stride, uint64_t ram_budget) {
  if (!cold_store_available(kind))
    return make_input_error(std::string("embedding.tier: the ") + cold_store_kind_name(kind)
                            + " cold store is not compiled in (install librocksdb-dev and build "
                              "again: ops/setup.sh)");
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return make_input_error(dir + ": making the tier's folder: " + std::strerror(errno));
  if (kind == cold_store_kind::slot_file)
    return open_slot_file_store(dir, stride);
#ifdef SATRAP_HAVE_ROCKSDB
  return open_rocksdb_store(dir, stride, ram_budget);
#else
  (void)ram_budget;
  return make_model_error("unreachable");
#endif
}

}  // namespace satrap
