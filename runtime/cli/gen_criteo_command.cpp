#include "runtime/cli/gen_criteo_command.hpp"

#include "models/data/synthetic.hpp"
#include "models/data/text_format.hpp"
#include "models/embedding/id_map.hpp"
#include "models/metrics.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

namespace satrap {

void gen_criteo_command::add_to(CLI::App& app) {
  sub_ = app.add_subcommand("gen-criteo", "Write Criteo-format files (train-<i>.txt, test.txt) "
                                          "from the synthetic teacher");
  auto& o = options_;
  sub_->add_option("--out", o.out, "output folder")->required();
  sub_->add_option("--train-samples", o.train_samples, "training lines in all")->capture_default_str();
  sub_->add_option("--test-samples", o.test_samples, "test lines")->capture_default_str();
  sub_->add_option("--files", o.files, "training files")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  sub_->add_flag("--gzip", o.gzip, "write gzip files (.gz)");
  sub_->add_option("--seed", o.seed, "data and teacher seed")->capture_default_str();
  sub_->add_option("--vocab", o.vocab, "distinct ids per category")->capture_default_str();
  sub_->add_option("--missing", o.missing, "share of empty fields")->capture_default_str()->check(CLI::Range(0.0, 1.0));
}

namespace {

synthetic_options criteo_shape(const gen_criteo_options& o) {
  synthetic_options s;
  s.slots = criteo_categories;
  s.dense_features = criteo_dense_features;
  s.vocab = o.vocab;
  s.seed = o.seed;
  return s;
}

// One sample as a Criteo line. A dense N(0,1) value x becomes the count expm1(x + 3) (so the
// reader's log(1+count) gives back x + 3 above -3); a category id its low 32 bits in hex.
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
bool write_file(const std::string& path, const synthetic_generator& g, data_split split,
                int64_t first, int64_t count, const gen_criteo_options& o,
                std::vector<float>* probs, std::vector<float>* labels) {
  gzFile f = gzopen(path.c_str(), o.gzip ? "wb6" : "wbT");
  if (!f) {
    std::cerr << "satrap gen-criteo: " << path << ": cannot write\n";
    return false;
  }
  constexpr int batch_size = 1000;
  std::string line;
  for (int64_t n = first; n < first + count;) {
    auto k = n / batch_size;
    auto b = g.make_batch(split, k, batch_size);
    for (auto i = static_cast<int>(n - k * batch_size); i < batch_size && n < first + count; ++i, ++n) {
      format_line(b, i, o.seed * 0x9e3779b97f4a7c15ULL + (split == data_split::test), o.missing, line);
      gzwrite(f, line.data(), static_cast<unsigned>(line.size()));
      if (probs) {
        probs->push_back(b.probs[i]);
        labels->push_back(b.labels[i]);
      }
    }
  }
  return gzclose(f) == Z_OK;
}

}  // namespace

int gen_criteo_command::run() {
  auto& o = options_;
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec) {
    std::cerr << "satrap gen-criteo: --out " << o.out << ": " << ec.message() << "\n";
    return 2;
  }
  synthetic_generator g(criteo_shape(o));
  const std::string ext = o.gzip ? ".txt.gz" : ".txt";
  int64_t done = 0;
  for (int i = 0; i < o.files; ++i) {
    auto count = o.train_samples * (i + 1) / o.files - done;
    auto path = o.out + "/train-" + std::to_string(i) + ext;
    if (!write_file(path, g, data_split::train, done, count, o, nullptr, nullptr))
      return 1;
    done += count;
  }
  std::vector<float> probs, labels;
  if (!write_file(o.out + "/test" + ext, g, data_split::test, 0, o.test_samples, o, &probs, &labels))
    return 1;
  std::printf("wrote %lld training lines in %d files and %lld test lines to %s; test oracle auc %.4f\n",
              static_cast<long long>(o.train_samples), o.files, static_cast<long long>(o.test_samples),
              o.out.c_str(), labels.empty() ? 0.0 : auc_exact(probs, labels));
  return 0;
}

}  // namespace satrap
