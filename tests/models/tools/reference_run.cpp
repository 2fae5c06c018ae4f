// Measures reference_train with the default options (the `satrap train` defaults), or with
// overrides given as "key value" pairs, e.g. `reference_run train_batches 2000 zipf 1.2`.
// Not part of the test suite: a full default run takes about a minute.
// Set OPENBLAS_NUM_THREADS=1 for a single-threaded measurement.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "models/reference_trainer.hpp"

using namespace satrap;

int main(int argc, char** argv) {
  synthetic_options data;
  reference_options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    double v = std::atof(argv[i + 1]);
    if (key == "slots")
      data.slots = static_cast<int>(v);
    else if (key == "vocab")
      data.vocab = static_cast<uint64_t>(v);
    else if (key == "zipf")
      data.zipf_exponent = v;
    else if (key == "ids_per_sample")
      data.ids_per_sample = static_cast<int>(v);
    else if (key == "teacher_id_std")
      data.teacher_id_std = v;
    else if (key == "teacher_pair_std")
      data.teacher_pair_std = v;
    else if (key == "teacher_dense_std")
      data.teacher_dense_std = v;
    else if (key == "seed")
      data.seed = static_cast<uint64_t>(v);
    else if (key == "batch_size")
      o.batch_size = static_cast<int>(v);
    else if (key == "train_batches")
      o.train_batches = static_cast<int64_t>(v);
    else if (key == "test_batches")
      o.test_batches = static_cast<int64_t>(v);
    else if (key == "embedding_lr")
      o.embedding.learning_rate = static_cast<float>(v);
    else if (key == "dense_lr")
      o.dense.learning_rate = static_cast<float>(v);
    else {
      std::fprintf(stderr, "unknown key %s\n", key.c_str());
      return 2;
    }
  }
  o.model.slots = data.slots;
  o.model.dense_features = data.dense_features;
  synthetic_generator generator(data);
  reference_result r = reference_train(generator, o);
  size_t n = r.batch_losses.size(), tail = std::min<size_t>(n, 100);
  double last = 0.0;
  for (size_t i = n - tail; i < n; ++i)
    last += r.batch_losses[i] / static_cast<double>(tail);
  std::printf(
    "test_auc %.4f oracle_auc %.4f gap %.4f test_logloss %.4f last_train_loss %.4f "
    "samples_per_sec %.0f train_seconds %.1f\n",
    r.test_auc, r.oracle_auc, r.oracle_auc - r.test_auc, r.test_logloss, last, r.samples_per_sec,
    static_cast<double>(o.train_batches) * o.batch_size / r.samples_per_sec);
  return 0;
}
