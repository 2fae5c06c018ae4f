#include "models/data/file_source.hpp"

#include "models/data/permutation.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

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

int64_t file_source::train_sample(int64_t position) const {
  const auto n = train_view_.count;
  const auto epoch = static_cast<uint64_t>(position / n);
  const auto r = position % n;
  if (!options_.shuffle)
    return r;
  const auto window = std::min<int64_t>(options_.shuffle_window, n);
  const auto full = n / window;  // full windows take part in the window permutation
  auto w = r / window, offset = r % window;
  auto size = w < full ? window : n - full * window;
  auto epoch_key = mix64(options_.seed ^ mix64(epoch + 0x5eed));
  if (w < full)
    w = static_cast<int64_t>(index_permutation(static_cast<uint64_t>(full), epoch_key).at(static_cast<uint64_t>(w)));
  index_permutation within(static_cast<uint64_t>(size), mix64(epoch_key ^ static_cast<uint64_t>(w)));
  return w * window + static_cast<int64_t>(within.at(static_cast<uint64_t>(offset)));
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
  for (int64_t p = first; p < last; ++p) {
    auto i = split == data_split::train ? train_sample(p) : p;
    view.store->append_sample(view.first + i, b);
  }
  return b;
}

}  // namespace satrap
