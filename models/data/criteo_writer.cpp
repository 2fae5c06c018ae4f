#include "models/data/criteo_writer.hpp"

#include "models/data/synthetic.hpp"
#include "models/data/text_format.hpp"
#include "models/embedding/id_map.hpp"
#include "models/metrics.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

namespace satrap {

namespace {

synthetic_options criteo_shape(const criteo_write_options& o) {
  synthetic_options s;
  s.slots = criteo_categories;
  s.dense_features = criteo_dense_features;
  s.vocab = o.vocab;
  s.seed = o.seed;
  return s;
}

// One sample as a Criteo line.
void format_line(const batch& b, int i, uint64_t salt, double missing, std::string& line) {
  auto empty = [&](int field) {
    auto h = mix64(salt ^ mix64(static_cast<uint64_t>(b.index * b.size + i) * 64 + field));
    return static_cast<double>(h >> 11) * 0x1.0p-53 < missing;
  };
  char buf[32];
  line = b.labels[i] > 0.5f ? "1" : "0";
  for (int f = 0; f < b.dense_features; ++f) {
    line += '\t';
    if (empty(f))
      continue;
    auto x = b.dense[static_cast<size_t>(i) * b.dense_features + f];
    std::snprintf(buf, sizeof buf, "%lld", std::llround(std::expm1(std::max(0.0, x + 3.0))));
    line += buf;
  }
  for (int s = 0; s < b.slots; ++s) {
    line += '\t';
    if (empty(b.dense_features + s))
      continue;
    auto id = b.ids[b.offsets[static_cast<size_t>(i) * b.slots + s]];
    std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(id & 0xffffffffu));
    line += buf;
  }
  line += '\n';
}

// Writes samples [first, first+count) of `split` to `path`; appends the teacher's probabilities
// and the labels to `probs` / `labels` when given.
result<ok_t> write_file(const std::string& path, const synthetic_generator& g, data_split split,
                        int64_t first, int64_t count, const criteo_write_options& o,
                        std::vector<float>* probs, std::vector<float>* labels) {
  gzFile f = gzopen(path.c_str(), o.gzip ? "wb6" : "wbT");
  if (!f)
    return make_model_error(path + ": cannot write");
  constexpr int batch_size = 1000;
  std::string line;
  bool ok = true;
  for (int64_t n = first; n < first + count && ok;) {
    auto k = n / batch_size;
    auto b = g.make_batch(split, k, batch_size);
    for (auto i = static_cast<int>(n - k * batch_size); i < batch_size && n < first + count;
         ++i, ++n) {
      format_line(b, i, o.seed * 0x9e3779b97f4a7c15ULL + (split == data_split::test), o.missing,
                  line);
      if (gzwrite(f, line.data(), static_cast<unsigned>(line.size()))
          != static_cast<int>(line.size())) {
        ok = false;
        break;
      }
      if (probs) {
        probs->push_back(b.probs[i]);
        labels->push_back(b.labels[i]);
      }
    }
  }
  if (gzclose(f) != Z_OK || !ok)
    return make_model_error(path + ": write failed (disk full?)");
  return ok_t{};
}

}  // namespace

result<ok_t> criteo_write_check(const criteo_write_options& o) {
  if (o.out.empty())
    return make_input_error("the output folder is empty");
  if (o.train_samples < 0)
    return make_input_error("train_samples: expected >= 0, got " + std::to_string(o.train_samples));
  if (o.test_samples < 0)
    return make_input_error("test_samples: expected >= 0, got " + std::to_string(o.test_samples));
  if (o.files < 1)
    return make_input_error("files: expected >= 1, got " + std::to_string(o.files));
  if (o.vocab < 1)
    return make_input_error("vocab: expected >= 1");
  if (!(o.missing >= 0.0 && o.missing <= 1.0))
    return make_input_error("missing: expected a share in [0, 1]");
  return ok_t{};
}

result<criteo_write_summary> write_criteo_files(const criteo_write_options& o) {
  if (auto checked = criteo_write_check(o); !checked)
    return checked.failure();
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec)
    return make_model_error(o.out + ": " + ec.message());
  synthetic_generator g(criteo_shape(o));
  const std::string ext = o.gzip ? ".txt.gz" : ".txt";
  int64_t done = 0;
  for (int i = 0; i < o.files; ++i) {
    auto count = o.train_samples * (i + 1) / o.files - done;
    auto path = o.out + "/train-" + std::to_string(i) + ext;
    if (auto w = write_file(path, g, data_split::train, done, count, o, nullptr, nullptr); !w)
      return make_model_error(w.error());
    done += count;
  }
  std::vector<float> probs, labels;
  if (auto w = write_file(o.out + "/test" + ext, g, data_split::test, 0, o.test_samples, o, &probs,
                          &labels);
      !w)
    return make_model_error(w.error());
  criteo_write_summary s;
  s.test_oracle_auc = labels.empty() ? 0.0 : auc_exact(probs, labels);
  return s;
}

}  // namespace satrap
