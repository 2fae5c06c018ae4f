#include "models/data/file_source.hpp"

#include "models/data/permutation.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <optional>

namespace satrap {

std::unique_ptr<file_source> file_source::open(const std::string& train_dir,
                                               const std::string& test_dir,
                                               const file_source_options& options,
                                               std::string& error) {
  std::unique_ptr<file_source> src(new file_source());
  src->options_ = options;
  src->train_ = chunk_store::open(train_dir, error);
  if (!src->train_)
    return nullptr;
  auto total = src->train_->samples();
  if (test_dir.empty()) {
    auto held = static_cast<int64_t>(std::ceil(options.test_fraction * static_cast<double>(total)));
    src->train_view_ = {src->train_.get(), 0, total - held};
    src->test_view_ = {src->train_.get(), total - held, held};
  } else {
    src->test_ = chunk_store::open(test_dir, error);
    if (!src->test_)
      return nullptr;
    if (src->test_->slots() != src->train_->slots()
        || src->test_->dense_features() != src->train_->dense_features()) {
      error = "the test files' samples differ in shape from the training files'";
      return nullptr;
    }
    src->train_view_ = {src->train_.get(), 0, total};
    src->test_view_ = {src->test_.get(), 0, src->test_->samples()};
  }
  if (src->train_view_.count <= 0 || src->test_view_.count <= 0) {
    error = "the " + std::string(src->train_view_.count <= 0 ? "training" : "test")
            + " split has no samples (" + std::to_string(total) + " samples read; check the files, "
            "data.test_fraction and data.on_error)";
    return nullptr;
  }
  return src;
}

int64_t file_source::samples(data_split split) const {
  return split == data_split::train ? train_view_.count : test_view_.count;
}

namespace {

// Where the shuffle puts the positions of one window of one epoch.
struct window_order {
  int64_t epoch = -1, window = -1;  // which one (-1: none yet)
  int64_t base = 0;                 // first sample of the window the positions land in
  std::optional<index_permutation> within;
};

}  // namespace

int64_t file_source::train_sample(int64_t position) const {
  batch b;
  b.offsets.push_back(0);
  append_train(position, position + 1, b);
  return b.index;  // append_train leaves the last sample number it read in b.index
}

void file_source::append_train(int64_t first, int64_t last, batch& b) const {
  const auto n = train_view_.count;
  const auto window = options_.shuffle ? std::min<int64_t>(options_.shuffle_window, n) : n;
  const auto full = n / window;  // full windows take part in the window permutation
  window_order order;
  for (int64_t p = first; p < last; ++p) {
    const auto epoch = p / n, r = p % n;
    auto w = r / window, offset = r % window;
    int64_t i = r;
    if (options_.shuffle) {
      if (epoch != order.epoch || w != order.window) {
        auto key = mix64(options_.seed ^ mix64(static_cast<uint64_t>(epoch) + 0x5eed));
        auto target = w < full ? static_cast<int64_t>(index_permutation(static_cast<uint64_t>(full), key)
                                                        .at(static_cast<uint64_t>(w)))
                               : w;
        auto size = w < full ? window : n - full * window;
        order = {epoch, w, target * window, {}};
        order.within.emplace(static_cast<uint64_t>(size), mix64(key ^ static_cast<uint64_t>(target)));
      }
      i = order.base + static_cast<int64_t>(order.within->at(static_cast<uint64_t>(offset)));
    }
    train_view_.store->append_sample(train_view_.first + i, b);
    b.index = i;
  }
}

batch file_source::make_batch(data_split split, int64_t index, int batch_size) const {
  const auto& view = split == data_split::train ? train_view_ : test_view_;
  int64_t first = index * batch_size;
  int64_t last = first + batch_size;
  if (split == data_split::test)
    last = std::min(last, view.count);
  assert(first < last);
  batch b;
  b.index = index;
  b.size = static_cast<int>(last - first);
  b.slots = slots();
  b.dense_features = dense_features();
  b.offsets.reserve(static_cast<size_t>(b.size) * static_cast<size_t>(b.slots) + 1);
  b.offsets.push_back(0);
  b.labels.reserve(static_cast<size_t>(b.size));
  if (split == data_split::train)
    append_train(first, last, b);
  else
    for (int64_t p = first; p < last; ++p)
      view.store->append_sample(view.first + p, b);
  b.index = index;
  return b;
}

}  // namespace satrap
