// Where the synthetic job's gap to the oracle comes from (issue 15): trains the reference loop
// (models/reference_trainer.cpp's steps) once, counting how often each id is trained on, then
// evaluates the same model several ways on the validation and the test split:
//   plain            the model as trained (what `satrap train` reports)
//   shrink k         every embedding row scaled by n/(n+k), n = the id's training samples
//   tail             embedding rows and dense weights averaged over the last `tail_from` of the
//                    steps (Polyak; an id's row weighted by how long it held each value)
//   ema d            dense weights replaced by their exponential moving average (decay d)
// and splits the test gap by the rarest id of a sample (oracle and model AUC per bin).
// Usage: synthetic_gap_bench [key value]...  keys: train_batches batch_size embedding_lr
// initial_accumulator dense_lr interaction(0 dot,1 cat,2 dot_cat) dim tail_from seed
// validation_batches test_batches. Defaults: job file J of the README (dot_cat, lr 0.2, 1e-6).
// Not a test: one run trains 10M samples (~40 s single-threaded).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/data/synthetic.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/model_zoo.hpp"
#include "models/embedding/embedding_table.hpp"
#include "models/embedding/id_map.hpp"
#include "models/embedding/pooling.hpp"
#include "models/metrics.hpp"
#include "models/reference_trainer.hpp"

using namespace satrap;

namespace {

struct row_average {  // time-weighted sum of a row's values since the averaging started
  std::vector<float> sum;
  int64_t since = 0;        // the step the row has held its current value since
  std::vector<float> usum;  // the sum of the row's values before each of its updates (per update)
  uint32_t updates = 0;
};

}  // namespace

int main(int argc, char** argv) {
  synthetic_options data;
  dense_model_config mc;
  mc.interaction = dlrm_interaction::dot_cat;
  embedding_options eo;
  eo.learning_rate = 0.2f;
  eo.initial_accumulator = 1e-6f;
  dense_optimizer_options dopt;
  int bs = 1024;
  int64_t train_batches = 10000, validation_batches = 20, test_batches = 100;
  double tail_from = 0.5;
  uint64_t seed = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    double v = std::atof(argv[i + 1]);
    if (key == "train_batches")
      train_batches = static_cast<int64_t>(v);
    else if (key == "batch_size")
      bs = static_cast<int>(v);
    else if (key == "validation_batches")
      validation_batches = static_cast<int64_t>(v);
    else if (key == "test_batches")
      test_batches = static_cast<int64_t>(v);
    else if (key == "embedding_lr")
      eo.learning_rate = static_cast<float>(v);
    else if (key == "initial_accumulator")
      eo.initial_accumulator = static_cast<float>(v);
    else if (key == "dense_lr")
      dopt.learning_rate = static_cast<float>(v);
    else if (key == "interaction")
      mc.interaction = static_cast<dlrm_interaction>(static_cast<int>(v));
    else if (key == "dim")
      mc.dim = eo.dim = static_cast<int>(v);
    else if (key == "tail_from")
      tail_from = v;
    else if (key == "seed")
      seed = static_cast<uint64_t>(v);
    else {
      std::fprintf(stderr, "unknown key %s\n", key.c_str());
      return 2;
    }
  }
  const int dim = eo.dim;
  synthetic_generator gen(data);
  embedding_table table(eo);
  auto model = make_dense_model(mc, seed);
  dense_optimizer optimizer(dopt, model->params().size());
  const size_t np = model->params().size();
  const int64_t tail_start = static_cast<int64_t>(tail_from * static_cast<double>(train_batches));
  const std::vector<double> decays = {0.998, 0.999, 0.9995};
  std::vector<std::vector<float>> ema(decays.size());
  std::vector<double> dense_tail(np, 0.0);
  std::unordered_map<uint64_t, uint32_t> count;
  std::unordered_map<uint64_t, row_average> tail;
  count.reserve(1 << 20);
  tail.reserve(1 << 20);

  dedup_result dd;
  std::vector<float> rows, pooled, pooled_grad, grad_unique, logits(bs), cur(dim);
  for (int64_t step = 0; step < train_batches; ++step) {
    batch b = gen.make_batch(data_split::train, step, bs);
    for (uint64_t id : b.ids)
      ++count[id];
    pool_batch(b, table, pooling::sum, dd, rows, pooled);
    pooled_grad.resize(pooled.size());
    model->forward_backward(bs, b.dense.data(), pooled.data(), b.labels.data(), 1.0f / bs,
                            logits.data(), pooled_grad.data());
    optimizer.step(model->params(), model->grads());
    auto p = model->params();
    for (size_t d = 0; d < decays.size(); ++d) {
      if (ema[d].empty())
        ema[d].assign(p.begin(), p.end());
      float a = static_cast<float>(decays[d]);
      for (size_t k = 0; k < np; ++k)
        ema[d][k] = a * ema[d][k] + (1.0f - a) * p[k];
    }
    if (step >= tail_start) {
      for (size_t k = 0; k < np; ++k)
        dense_tail[k] += p[k];
      // Rows about to change: add the value they held since their last change.
      for (size_t u = 0; u < dd.unique.size(); ++u) {
        auto& ra = tail[dd.unique[u]];
        if (ra.sum.empty()) {
          ra.sum.assign(dim, 0.0f);
          ra.usum.assign(dim, 0.0f);
          ra.since = tail_start;
        }
        const float* w = rows.data() + u * dim;
        for (int k = 0; k < dim; ++k)
          ra.sum[k] += w[k] * static_cast<float>(step - ra.since);
        for (int k = 0; k < dim; ++k)
          ra.usum[k] += w[k];
        ++ra.updates;
        ra.since = step;
      }
    }
    grad_unique.assign(dd.unique.size() * dim, 0.0f);
    pool_backward(pooling::sum, dim, b.offsets, dd.inverse, pooled_grad.data(), grad_unique.data());
    table.update(dd.unique, grad_unique.data());
  }
  const std::vector<float> final_params(model->params().begin(), model->params().end());
  std::vector<float> tail_params(np);
  const double tail_steps = static_cast<double>(train_batches - tail_start);
  for (size_t k = 0; k < np; ++k)
    tail_params[k] = static_cast<float>(dense_tail[k] / tail_steps);

  // A variant: which dense weights, and how a row is read.
  enum class rowmode { plain, shrink, tail, update_avg };
  struct variant {
    std::string name;
    const std::vector<float>* params;
    rowmode mode;
    double k;
  };
  std::vector<variant> variants = {{"plain", &final_params, rowmode::plain, 0}};
  for (double k : {0.5, 1.0, 2.0, 4.0, 8.0, 16.0})
    variants.push_back(
      {"shrink_" + std::to_string(k).substr(0, 4), &final_params, rowmode::shrink, k});
  variants.push_back({"tail_rows_only", &final_params, rowmode::tail, 0});
  variants.push_back({"tail_dense_only", &tail_params, rowmode::plain, 0});
  variants.push_back({"tail_both", &tail_params, rowmode::tail, 0});
  for (size_t d = 0; d < decays.size(); ++d)
    variants.push_back(
      {"ema_" + std::to_string(decays[d]).substr(0, 6), &ema[d], rowmode::plain, 0});
  variants.push_back({"ema_0.999_tail_rows", &ema[1], rowmode::tail, 0});
  variants.push_back({"update_avg_rows_only", &final_params, rowmode::update_avg, 0});
  variants.push_back({"ema_0.999_update_avg_rows", &ema[1], rowmode::update_avg, 0});

  auto read_row = [&](const variant& v, uint64_t id, float* out) {
    table.peek(std::span<const uint64_t>(&id, 1), out);
    if (v.mode == rowmode::shrink) {
      auto it = count.find(id);
      double n = it == count.end() ? 0.0 : it->second;
      float f = static_cast<float>(n / (n + v.k));
      for (int k = 0; k < dim; ++k)
        out[k] *= f;
    } else if (v.mode == rowmode::update_avg) {
      auto it = tail.find(id);
      if (it != tail.end())
        for (int k = 0; k < dim; ++k)
          out[k] = (it->second.usum[k] + out[k]) / static_cast<float>(it->second.updates + 1);
    } else if (v.mode == rowmode::tail) {
      auto it = tail.find(id);
      if (it != tail.end()) {
        for (int k = 0; k < dim; ++k)
          out[k] = static_cast<float>(
            (it->second.sum[k] + out[k] * static_cast<double>(train_batches - it->second.since))
            / tail_steps);
      }
    }
  };

  // Evaluate every variant on a split; for test also by the rarest id's training count.
  const std::vector<uint32_t> bin_edges = {10, 100, 1000};  // bins: <10, 10-99, 100-999, >=1000
  auto bin_of = [&](uint32_t n) {
    size_t b = 0;
    while (b < bin_edges.size() && n >= bin_edges[b])
      ++b;
    return b;
  };
  for (data_split split : {data_split::validation, data_split::test}) {
    int64_t nb = split == data_split::test ? test_batches : validation_batches;
    std::vector<batch> bats;
    for (int64_t i = 0; i < nb; ++i)
      bats.push_back(gen.make_batch(split, i, bs));
    std::vector<float> labels, probs;
    std::vector<size_t> bins;
    for (auto& b : bats) {
      labels.insert(labels.end(), b.labels.begin(), b.labels.end());
      probs.insert(probs.end(), b.probs.begin(), b.probs.end());
      for (int i = 0; i < b.size; ++i) {
        uint32_t mn = UINT32_MAX;
        for (int s = 0; s < b.slots; ++s) {
          auto it = count.find(b.ids[static_cast<size_t>(i) * b.slots + s]);
          mn = std::min<uint32_t>(mn, it == count.end() ? 0 : it->second);
        }
        bins.push_back(bin_of(mn));
      }
    }
    const char* sname = split == data_split::test ? "test" : "validation";
    double oracle = auc_exact(probs, labels);
    std::printf("%s samples=%zu oracle_auc=%.4f\n", sname, labels.size(), oracle);
    // The floor of a learner that knows the teacher's form and estimates each id's first-order
    // effect (prior std sigma) from its n training samples, Fisher information `info` each: its
    // posterior mean is s*w + s*noise, s = n*info/(n*info + 1/sigma^2) (Gaussian approximation).
    for (double info : {0.1, 0.17, 0.25}) {
      const double sigma2 = 1.0, id_scale = data.teacher_id_std / std::sqrt(double(data.slots));
      uint64_t rng = 12345;
      std::vector<float> est;
      size_t j = 0;
      for (auto& b : bats)
        for (int i = 0; i < b.size; ++i, ++j) {
          double p = probs[j], logit = std::log(p / (1.0 - p));
          for (int s = 0; s < b.slots; ++s) {
            uint64_t id = b.ids[static_cast<size_t>(i) * b.slots + s];
            double w =
              (static_cast<double>(mix64(id ^ mix64(data.seed ^ 0x1d8e4e27c47d124fULL)) >> 11)
                 * 0x1.0p-53 * 2.0
               - 1.0)
              * 1.7320508075688772;
            auto it = count.find(id);
            double n = it == count.end() ? 0.0 : it->second;
            double prec = 1.0 / (sigma2 * id_scale * id_scale);  // prior precision in logit units
            double sh = n * info / (n * info + prec);
            rng += 0x9e3779b97f4a7c15ULL;
            double u1 = (static_cast<double>(mix64(rng) >> 11) + 0.5) * 0x1.0p-53;
            rng += 0x9e3779b97f4a7c15ULL;
            double u2 = (static_cast<double>(mix64(rng) >> 11) + 0.5) * 0x1.0p-53;
            double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
            double sd = std::sqrt(sh * (1.0 - sh)) * id_scale;
            logit += (sh - 1.0) * id_scale * w + sd * z;
          }
          est.push_back(static_cast<float>(1.0 / (1.0 + std::exp(-logit))));
        }
      double fa = auc_exact(est, labels);
      std::printf("  %s bayes_floor info=%.2f auc=%.4f gap=%.4f\n", sname, info, fa, oracle - fa);
      if (split == data_split::test && info == 0.17)
        for (size_t bi = 0; bi <= bin_edges.size(); ++bi) {
          std::vector<float> e2, l2, p2;
          for (size_t i = 0; i < est.size(); ++i)
            if (bins[i] == bi)
              e2.push_back(est[i]), l2.push_back(labels[i]), p2.push_back(probs[i]);
          double ob = auc_exact(p2, l2), fb = auc_exact(e2, l2);
          std::printf("    bayes_floor bin=%zu min_count>=%u oracle_auc=%.4f auc=%.4f gap=%.4f\n",
                      bi, bi == 0 ? 0u : bin_edges[bi - 1], ob, fb, ob - fb);
        }
    }
    for (auto& v : variants) {
      std::copy(v.params->begin(), v.params->end(), model->params().begin());
      std::vector<float> scores;
      for (auto& b : bats) {
        pooled.resize(static_cast<size_t>(bs) * b.slots * dim);
        for (size_t j = 0; j < b.ids.size(); ++j)
          read_row(v, b.ids[j], pooled.data() + j * dim);
        model->forward(bs, b.dense.data(), pooled.data(), logits.data());
        for (float l : logits)
          scores.push_back(sigmoid(l));
      }
      double a = auc_exact(scores, labels);
      std::printf("  %s variant=%s auc=%.4f gap=%.4f", sname, v.name.c_str(), a, oracle - a);
      if (split == data_split::test && v.mode == rowmode::plain && v.params == &final_params) {
        std::printf("\n");
        for (size_t bi = 0; bi <= bin_edges.size(); ++bi) {
          std::vector<float> s2, l2, p2;
          for (size_t i = 0; i < scores.size(); ++i)
            if (bins[i] == bi)
              s2.push_back(scores[i]), l2.push_back(labels[i]), p2.push_back(probs[i]);
          double ob = auc_exact(p2, l2), mb = auc_exact(s2, l2);
          std::printf("    bin=%zu min_count>=%u share=%.4f oracle_auc=%.4f auc=%.4f gap=%.4f\n",
                      bi, bi == 0 ? 0u : bin_edges[bi - 1], double(s2.size()) / scores.size(), ob,
                      mb, ob - mb);
        }
      } else {
        std::printf("\n");
      }
    }
  }
  return 0;
}
