#include "models/data/file_source.hpp"
#include "models/assert.hpp"

#include "models/data/permutation.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>

namespace satrap {

result<std::unique_ptr<file_source>> file_source::open(const std::string& train_dir,
                                                       const std::string& test_dir,
                                                       const file_source_options& options,
                                                       const std::string& validation_dir) {
  std::unique_ptr<file_source> src(new file_source());
  src->options_ = options;
  auto train = chunk_store::open(train_dir);
  if (!train)
    return train.failure();
  src->train_ = std::move(train.value());
  auto total = src->train_->samples();
  if (test_dir.empty()) {
    auto held = static_cast<int64_t>(std::ceil(options.test_fraction * static_cast<double>(total)));
    src->train_view_ = {src->train_.get(), 0, total - held};
    src->test_view_ = {src->train_.get(), total - held, held};
  } else {
    auto test = chunk_store::open(test_dir);
    if (!test)
      return test.failure();
    src->test_ = std::move(test.value());
    if (src->test_->slots() != src->train_->slots()
        || src->test_->dense_features() != src->train_->dense_features()
        || src->test_->weighted() != src->train_->weighted()
        || src->test_->tasks() != src->train_->tasks())
      return make_model_error("the test files' samples differ in shape from the training files'");
    src->train_view_ = {src->train_.get(), 0, total};
    src->test_view_ = {src->test_.get(), 0, src->test_->samples()};
  }
  if (!validation_dir.empty()) {
    auto valid = chunk_store::open(validation_dir);
    if (!valid)
      return valid.failure();
    src->valid_ = std::move(valid.value());
    if (src->valid_->slots() != src->train_->slots()
        || src->valid_->dense_features() != src->train_->dense_features()
        || src->valid_->weighted() != src->train_->weighted()
        || src->valid_->tasks() != src->train_->tasks())
      return make_model_error(
        "the validation files' samples differ in shape from the training files'");
    src->valid_view_ = {src->valid_.get(), 0, src->valid_->samples()};
    if (src->valid_view_.count <= 0)
      return make_model_error("the validation split has no samples (check data.validation_files)");
  } else if (options.validation_fraction > 0.0) {
    auto n = src->train_view_.count;
    src->carved_rows_ = n;
    auto words = static_cast<size_t>((n + 63) / 64);
    src->valid_bits_.assign(words, 0);
    src->valid_before_.assign(words + 1, 0);
    const auto threshold = static_cast<uint64_t>(options.validation_fraction * 9007199254740992.0);
    for (int64_t r = 0; r < n; ++r) {
      auto h =
        mix64(mix64(options.seed + 0x7a11da7e) ^ static_cast<uint64_t>(src->train_view_.first + r))
        >> 11;
      if (h < threshold)
        src->valid_bits_[static_cast<size_t>(r / 64)] |= uint64_t{1} << (r % 64);
    }
    for (size_t w = 0; w < words; ++w)
      src->valid_before_[w + 1] = src->valid_before_[w] + std::popcount(src->valid_bits_[w]);
    auto v = src->valid_before_[words];
    src->valid_view_ = {src->train_view_.store, src->train_view_.first, v};
    src->train_view_.count = n - v;
    if (v <= 0)
      return make_model_error("data.validation_fraction "
                              + std::to_string(options.validation_fraction)
                              + " leaves no validation row of " + std::to_string(n) + ": raise it");
  }
  if (src->train_view_.count <= 0 || src->test_view_.count <= 0)
    return make_model_error(
      "the " + std::string(src->train_view_.count <= 0 ? "training" : "test")
      + " split has no samples (" + std::to_string(total)
      + " samples read; check the files, data.test_fraction and data.on_error)");
  return src;
}

int64_t file_source::samples(data_split split) const {
  switch (split) {
    case data_split::train: return train_view_.count;
    case data_split::test: return test_view_.count;
    case data_split::validation: return valid_view_.count;
  }
  return 0;
}

bool file_source::is_validation_row(int64_t row) const {
  auto r = row - train_view_.first;
  if (valid_bits_.empty() || r < 0 || r >= carved_rows_)
    return false;
  return (valid_bits_[static_cast<size_t>(r / 64)] >> (r % 64)) & 1;
}

int64_t file_source::select(int64_t i, bool ones) const {
  // Rows of the wanted kind before word w.
  auto before = [&](size_t w) {
    return ones ? valid_before_[w] : static_cast<int64_t>(w) * 64 - valid_before_[w];
  };
  size_t lo = 0, hi = valid_bits_.size();  // the last word w with before(w) <= i
  while (hi - lo > 1) {
    auto mid = (lo + hi) / 2;
    if (before(mid) <= i)
      lo = mid;
    else
      hi = mid;
  }
  auto bits = ones ? valid_bits_[lo] : ~valid_bits_[lo];
  for (auto k = i - before(lo); k > 0; --k)
    bits &= bits - 1;  // drop the lowest set bit k times
  return static_cast<int64_t>(lo) * 64 + std::countr_zero(bits);
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
        auto target =
          w < full ? static_cast<int64_t>(
            index_permutation(static_cast<uint64_t>(full), key).at(static_cast<uint64_t>(w)))
                   : w;
        auto size = w < full ? window : n - full * window;
        order = {epoch, w, target * window, {}};
        order.within.emplace(static_cast<uint64_t>(size),
                             mix64(key ^ static_cast<uint64_t>(target)));
      }
      i = order.base + static_cast<int64_t>(order.within->at(static_cast<uint64_t>(offset)));
    }
    auto row = valid_bits_.empty() ? i : select(i, false);
    train_view_.store->append_sample(train_view_.first + row, b);
    b.index = row;
  }
}

batch file_source::make_batch(data_split split, int64_t index, int batch_size) const {
  const auto& view = split == data_split::train  ? train_view_
                     : split == data_split::test ? test_view_
                                                 : valid_view_;
  int64_t first = index * batch_size;
  int64_t last = first + batch_size;
  if (split != data_split::train)
    last = std::min(last, view.count);
  SATRAP_ASSERT(first < last);
  batch b;
  b.index = index;
  b.size = static_cast<int>(last - first);
  b.slots = slots();
  b.dense_features = dense_features();
  b.tasks = tasks();
  b.offsets.reserve(static_cast<size_t>(b.size) * static_cast<size_t>(b.slots) + 1);
  b.offsets.push_back(0);
  b.labels.reserve(static_cast<size_t>(b.size) * static_cast<size_t>(b.tasks));
  if (split == data_split::train)
    append_train(first, last, b);
  else if (split == data_split::validation && !valid_bits_.empty())
    for (int64_t p = first; p < last; ++p)
      view.store->append_sample(view.first + select(p, true), b);
  else
    for (int64_t p = first; p < last; ++p)
      view.store->append_sample(view.first + p, b);
  b.index = index;
  return b;
}

}  // namespace satrap
