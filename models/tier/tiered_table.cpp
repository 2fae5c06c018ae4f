#include "models/tier/tiered_table.hpp"
#include "models/assert.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>

namespace satrap {

struct tiered_table::job {
  enum kind_t { read, write, call } kind = read;
  bool prefetch = false;
  uint64_t seq = 0;
  std::vector<uint64_t> ids;
  std::vector<std::byte> rows;       // write: the rows; read: filled by the worker
  std::vector<uint8_t> found;        // read: filled by the worker
  std::function<result<ok_t>()> fn;  // call
  std::string error;                 // set by the worker on failure
  size_t live = 0;                   // staged entries pointing into it (read)
};

uint64_t tiered_table::ram_rows(const embedding_options& options, uint64_t ram_budget) {
  const row_layout layout = row_layout::of(options);
  // The table's bytes per row: the row, ~1.25 index slots of 12 bytes, bitmaps.
  const double per_row = static_cast<double>(layout.stride) + 16.0;
  auto rows = static_cast<uint64_t>(0.85 * static_cast<double>(ram_budget) / per_row);
  return std::max<uint64_t>(rows, 64);
}

result<std::unique_ptr<tiered_table>> tiered_table::open(embedding_options options,
                                                         const tier_options& tier) {
  if (options.eviction != eviction_kind::clock)
    return make_input_error("embedding.tier: needs embedding.eviction clock (rows leave RAM)");
  if (tier.ram_budget == 0)
    return make_input_error("embedding.tier.ram_budget: expected a size > 0");
  options.capacity = ram_rows(options, tier.ram_budget);
  auto cold =
    open_cold_store(tier.store, tier.path, row_layout::of(options).stride, tier.ram_budget);
  if (!cold)
    return cold.failure();
  return std::unique_ptr<tiered_table>(new tiered_table(options, tier, std::move(*cold)));
}

tiered_table::tiered_table(const embedding_options& options, const tier_options& tier,
                           std::unique_ptr<cold_store> cold)
    : table_(options),
      tier_(tier),
      cold_(std::move(cold)),
      stride_(table_.layout().stride),
      weights_(static_cast<size_t>(options.dim)) {
  table_.set_tier(this);
  counters_.ram_rows = options.capacity;
  worker_ = std::thread([this] { worker_loop(); });
}

tiered_table::~tiered_table() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void tiered_table::worker_loop() {
  for (;;) {
    std::shared_ptr<job> j;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty())
        return;  // stop_, nothing left
      j = queue_.front();
    }
    result<ok_t> r = ok_t{};
    if (j->kind == job::read) {
      j->rows.resize(j->ids.size() * stride_);
      j->found.assign(j->ids.size(), 0);
      r = cold_->get(j->ids, j->rows.data(), j->found.data());
    } else if (j->kind == job::write) {
      r = cold_->put(j->ids, j->rows.data());
    } else {
      r = j->fn();
    }
    {
      std::lock_guard lock(mu_);
      if (!r)
        j->error = r.error();
      cold_seen_ = cold_->counters();  // the owner reads these copies, never the store's own
      cold_ram_ = cold_->ram_bytes();
      queue_.pop_front();
      done_ = j->seq;
    }
    cv_.notify_all();
  }
}

uint64_t tiered_table::submit(std::shared_ptr<job> j) {
  {
    std::lock_guard lock(mu_);
    j->seq = ++next_seq_;
    queue_.push_back(j);
  }
  cv_.notify_all();
  return j->seq;
}

void tiered_table::wait_for(uint64_t seq) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_ >= seq; });
}

void tiered_table::drop_staged(uint64_t id) {
  auto it = staged_.find(id);
  if (it == staged_.end())
    return;
  auto j = reads_.find(it->second.seq);
  if (j != reads_.end() && --j->second->live == 0)
    reads_.erase(j);  // the worker holds its own reference while the job runs
  staged_.erase(it);
}

void tiered_table::drop_job_entries(const std::shared_ptr<job>& j) {
  for (uint64_t id : j->ids) {
    auto it = staged_.find(id);
    if (it != staged_.end() && it->second.seq == j->seq)
      drop_staged(id);
  }
  reads_.erase(j->seq);
}

bool tiered_table::copy_pending(uint64_t id, std::byte* row) const {
  if (auto p = pending_at_.find(id); p != pending_at_.end()) {
    std::memcpy(row, pending_rows_.data() + size_t{p->second} * stride_, stride_);
    return true;
  }
  if (auto w = writing_at_.find(id); w != writing_at_.end()) {
    std::memcpy(row, writing_->rows.data() + size_t{w->second} * stride_, stride_);
    return true;
  }
  return false;
}

// Called by the table as it admits an absent id: prepare() made sure every absent id of the call
// is pending, writing or staged with its read done. An id evicted during the call and needed again
// is pending.
bool tiered_table::fetch(uint64_t id, std::byte* row) {
  if (copy_pending(id, row)) {
    drop_staged(id);
    ++counters_.cold_hits;
    return true;
  }
  auto it = staged_.find(id);
  SATRAP_ASSERT(it != staged_.end(), "tier: id {} absent from RAM was not prepared", id);
  const job& j = *reads_.at(it->second.seq);
  const uint32_t pos = it->second.pos;
  const bool found = j.found[pos] != 0;
  if (found) {
    std::memcpy(row, j.rows.data() + size_t{pos} * stride_, stride_);
    ++counters_.cold_hits;
    counters_.prefetch_hits += j.prefetch;
  }
  drop_staged(id);
  return found;
}

void tiered_table::evicted(uint64_t id, const std::byte* row) {
  auto [it, inserted] = pending_at_.try_emplace(id, static_cast<uint32_t>(pending_ids_.size()));
  if (inserted) {
    pending_ids_.push_back(id);
    pending_rows_.insert(pending_rows_.end(), row, row + stride_);
  } else {
    std::memcpy(pending_rows_.data() + size_t{it->second} * stride_, row, stride_);
  }
}

void tiered_table::prefetch(std::span<const uint64_t> ids) {
  missing_.clear();
  table_.absent(ids, missing_);
  auto j = std::make_shared<job>();
  j->prefetch = true;
  for (uint64_t id : missing_)
    if (!pending_at_.contains(id) && !writing_at_.contains(id) && !staged_.contains(id)) {
      staged_.emplace(id, staged_entry{0, static_cast<uint32_t>(j->ids.size())});
      j->ids.push_back(id);
    }
  if (j->ids.empty())
    return;
  uint64_t seq = submit(j);
  for (uint64_t id : j->ids)
    staged_.at(id).seq = seq;
  j->live = j->ids.size();
  reads_.emplace(seq, j);
  prefetches_.push_back(seq);
  while (prefetches_.size() > tier_.prefetch_batches) {  // the oldest staged batch goes
    auto old = reads_.find(prefetches_.front());
    prefetches_.pop_front();
    if (old != reads_.end())
      drop_job_entries(std::shared_ptr<job>(old->second));
  }
}

result<ok_t> tiered_table::prepare(std::span<const uint64_t> ids, bool count) {
  if (!failed_.empty()) {
    std::string why = std::move(failed_);
    failed_.clear();
    return make_model_error(why);
  }
  missing_.clear();
  table_.absent(ids, missing_);
  if (count) {
    counters_.hits += ids.size() - missing_.size();
    counters_.misses += missing_.size();
  }
  uint64_t wait = 0;
  auto j = std::make_shared<job>();
  for (uint64_t id : missing_) {
    if (pending_at_.contains(id) || writing_at_.contains(id))
      continue;
    if (auto it = staged_.find(id); it != staged_.end()) {
      wait = std::max(wait, it->second.seq);
      continue;
    }
    staged_.emplace(id, staged_entry{0, static_cast<uint32_t>(j->ids.size())});
    j->ids.push_back(id);
  }
  if (!j->ids.empty()) {
    uint64_t seq = submit(j);
    for (uint64_t id : j->ids)
      staged_.at(id).seq = seq;
    j->live = j->ids.size();
    reads_.emplace(seq, j);
    wait = seq;
  }
  if (wait == 0)
    return ok_t{};
  bool done;
  {
    std::lock_guard lock(mu_);
    done = done_ >= wait;
  }
  if (!done) {
    ++counters_.read_waits;
    wait_for(wait);
  }
  // A failed read: its entries go (nothing changed), the call fails.
  std::string error;
  for (auto it = reads_.begin(); it != reads_.end();) {
    auto r = it++->second;
    if (r->seq <= wait && !r->error.empty()) {
      error = r->error;
      drop_job_entries(r);
    }
  }
  if (!error.empty())
    return make_model_error(error);
  return ok_t{};
}

result<ok_t> tiered_table::after_call() {
  if (writing_ != nullptr) {
    bool done;
    {
      std::lock_guard lock(mu_);
      done = done_ >= writing_->seq;
    }
    // Bound the rows in memory: with a full pending batch, wait for the write in flight.
    if (!done && pending_rows_.size() >= std::max<size_t>(stride_ * 4096, tier_.ram_budget / 16)) {
      wait_for(writing_->seq);
      done = true;
    }
    if (!done)
      return ok_t{};
    if (!writing_->error.empty()) {  // keep the rows (a newer pending copy wins), report
      failed_ = writing_->error;
      for (size_t i = 0; i < writing_->ids.size(); ++i)
        if (!pending_at_.contains(writing_->ids[i]))
          evicted(writing_->ids[i], writing_->rows.data() + i * stride_);
    }
    writing_.reset();
    writing_at_.clear();
  }
  if (pending_ids_.empty() || !failed_.empty())
    return ok_t{};
  auto j = std::make_shared<job>();
  j->kind = job::write;
  j->ids = std::move(pending_ids_);
  j->rows = std::move(pending_rows_);
  writing_at_ = std::move(pending_at_);
  pending_ids_.clear();
  pending_rows_.clear();
  pending_at_.clear();
  writing_ = j;
  submit(j);
  return ok_t{};
}

result<ok_t> tiered_table::lookup(std::span<const uint64_t> ids, float* out) {
  auto ready = prepare(ids, true);
  if (!ready)
    return ready;
  table_.lookup(ids, out);
  return after_call();
}

result<ok_t> tiered_table::update(std::span<const uint64_t> ids, const float* grads) {
  auto ready = prepare(ids, true);
  if (!ready)
    return ready;
  table_.update(ids, grads);
  return after_call();
}

result<ok_t> tiered_table::peek(std::span<const uint64_t> ids, float* out) {
  auto ready = prepare(ids, false);
  if (!ready)
    return ready;
  table_.peek(ids, out);
  std::vector<std::byte> row(stride_);
  const size_t dim = weights_.size();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (table_.contains(ids[i]))
      continue;
    bool found = copy_pending(ids[i], row.data());
    if (!found) {
      auto it = staged_.find(ids[i]);
      SATRAP_ASSERT(it != staged_.end());
      const job& j = *reads_.at(it->second.seq);
      found = j.found[it->second.pos] != 0;
      if (found)
        std::memcpy(row.data(), j.rows.data() + size_t{it->second.pos} * stride_, stride_);
    }
    if (found)
      table_.weights_of(row.data(), out + i * dim);
  }
  // The rows read for this call only go (a prefetch's stay for the lookup they were made for):
  // an evaluation's reads would otherwise stay staged until their ids were trained.
  for (uint64_t id : missing_)
    if (auto it = staged_.find(id); it != staged_.end() && !reads_.at(it->second.seq)->prefetch)
      drop_staged(id);
  return after_call();
}

result<ok_t> tiered_table::flush() {
  // The write in flight first (a failed one's rows come back to pending), then one write of the
  // pending rows and every RAM row (ids unique: a pending id back in RAM is written from RAM).
  if (writing_ != nullptr) {
    wait_for(writing_->seq);
    if (!writing_->error.empty())
      for (size_t i = 0; i < writing_->ids.size(); ++i)
        if (!pending_at_.contains(writing_->ids[i]))
          evicted(writing_->ids[i], writing_->rows.data() + i * stride_);
    writing_.reset();
    writing_at_.clear();
  }
  failed_.clear();
  // In writes of at most `chunk` rows: a copy of every RAM row at once would double the RAM tier.
  constexpr size_t chunk = 16384;
  std::shared_ptr<job> j;
  std::string error;
  auto send = [&](bool last) {
    if (j != nullptr && (last || j->ids.size() >= chunk)) {
      wait_for(submit(j));
      if (!j->error.empty() && error.empty())
        error = j->error;
      j.reset();
    }
    if (j == nullptr && !last) {
      j = std::make_shared<job>();
      j->kind = job::write;
    }
  };
  send(false);
  for (size_t i = 0; i < pending_ids_.size(); ++i)
    if (!table_.contains(pending_ids_[i])) {
      j->ids.push_back(pending_ids_[i]);
      j->rows.insert(j->rows.end(), pending_rows_.begin() + i * stride_,
                     pending_rows_.begin() + (i + 1) * stride_);
      send(false);
    }
  table_.for_each_row(false, [&](uint64_t id, const std::byte* row) {
    j->ids.push_back(id);
    j->rows.insert(j->rows.end(), row, row + stride_);
    send(false);
  });
  send(true);
  if (!error.empty())  // the rows stay where they were (RAM and pending)
    return make_model_error(error);
  pending_ids_.clear();
  pending_rows_.clear();
  pending_at_.clear();
  return ok_t{};
}

result<ok_t> tiered_table::checkpoint(const std::string& dir) {
  auto flushed = flush();
  if (!flushed)
    return flushed;
  auto j = std::make_shared<job>();
  j->kind = job::call;
  j->fn = [this, dir] { return cold_->checkpoint(dir); };
  wait_for(submit(j));
  if (!j->error.empty())
    return make_model_error(j->error);
  return ok_t{};
}

tier_counters tiered_table::counters() const {
  tier_counters c = counters_;
  cold_store_counters cold;
  uint64_t cold_ram = 0;
  {
    std::lock_guard lock(mu_);
    cold = cold_seen_;
    cold_ram = cold_ram_;
  }
  c.bytes_read = cold.bytes_read;
  c.bytes_written = cold.bytes_written;
  c.rows_written = cold.rows_written;
  size_t staged_bytes = 0;
  for (const auto& [seq, j] : reads_)
    staged_bytes += j->rows.capacity() + j->ids.capacity() * 8;
  c.ram_bytes = table_.counters().bytes + staged_bytes + pending_rows_.capacity()
                + (writing_ ? writing_->rows.capacity() : 0) + staged_.size() * 32 + cold_ram;
  return c;
}

result<ok_t> restore_tier(const std::string& checkpoint, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(checkpoint, ec))
    return make_input_error(checkpoint + ": the tier's checkpoint folder is missing");
  fs::remove_all(path, ec);
  if (ec)
    return make_model_error(path + ": removing the tier's folder: " + ec.message());
  fs::create_directories(path, ec);
  if (ec)
    return make_model_error(path + ": making the tier's folder: " + ec.message());
  for (const auto& entry : fs::directory_iterator(checkpoint, ec)) {
    const fs::path to = fs::path(path) / entry.path().filename();
    if (entry.path().extension() == ".sst")
      fs::create_hard_link(entry.path(), to, ec);
    if (entry.path().extension() != ".sst" || ec) {
      ec.clear();
      fs::copy_file(entry.path(), to, ec);
    }
    if (ec)
      return make_model_error(to.string() + ": restoring the tier: " + ec.message());
  }
  if (ec)
    return make_model_error(checkpoint + ": reading the tier's checkpoint: " + ec.message());
  return ok_t{};
}

}  // namespace satrap
