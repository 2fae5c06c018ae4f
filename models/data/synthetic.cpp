#include "models/data/synthetic.hpp"
#include "models/assert.hpp"

#include <cmath>
#include <numbers>
#include <vector>

#include "models/embedding/id_map.hpp"

namespace satrap {

namespace {

constexpr uint64_t golden = 0x9e3779b97f4a7c15ULL;

// splitmix64: a counter-based stream; one per sample.
inline uint64_t next_u64(uint64_t& state) { return mix64(state += golden); }
inline double next_unit(uint64_t& state) {  // (0, 1)
  return (static_cast<double>(next_u64(state) >> 11) + 0.5) * 0x1.0p-53;
}
inline double hash_unit_var(uint64_t h) {  // uniform(-sqrt 3, sqrt 3): mean 0, variance 1
  return (static_cast<double>(h >> 11) * 0x1.0p-53 * 2.0 - 1.0) * std::numbers::sqrt3;
}

// Helpers of the rejection-inversion sampler, stable near 0.
inline double helper1(double x) {  // log1p(x)/x
  return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}
inline double helper2(double x) {  // expm1(x)/x
  return std::abs(x) > 1e-8 ? std::expm1(x) / x
                            : 1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x));
}

struct zipf_math {
  double q;  // exponent
  double h(double x) const { return std::exp(-q * std::log(x)); }
  double h_integral(double x) const {
    double log_x = std::log(x);
    return helper2((1.0 - q) * log_x) * log_x;
  }
  double h_integral_inverse(double x) const {
    double t = x * (1.0 - q);
    if (t < -1.0)
      t = -1.0;
    return std::exp(helper1(t) * x);
  }
};

}  // namespace

synthetic_generator::synthetic_generator(const synthetic_options& options) : options_(options) {
  SATRAP_ASSERT(options.slots > 0 && options.vocab > 0 && options.zipf_exponent > 0.0);
  SATRAP_ASSERT(options.ids_per_sample > 0 && options.dense_features >= 0
                && options.teacher_latent_dim > 0 && (options.tasks == 1 || options.tasks == 2)
                && std::abs(options.purchase_correlation) <= 1.0);
  zipf_math z{options.zipf_exponent};
  h_integral_x1_ = z.h_integral(1.5) - 1.0;
  h_integral_n_ = z.h_integral(static_cast<double>(options.vocab) + 0.5);
  s_ = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
  double slots = options.slots, pairs = slots * (slots - 1.0) / 2.0;
  id_scale_ = options.teacher_id_std / std::sqrt(slots);
  pair_scale_ =
    pairs > 0 ? options.teacher_pair_std / std::sqrt(pairs * options.teacher_latent_dim) : 0.0;
  dense_scale_ = options.dense_features > 0
                   ? options.teacher_dense_std / std::sqrt(double(options.dense_features))
                   : 0.0;
}

uint64_t synthetic_generator::sample_rank(uint64_t& rng) const {
  zipf_math z{options_.zipf_exponent};
  double n = static_cast<double>(options_.vocab);
  for (;;) {
    double u = h_integral_n_ + next_unit(rng) * (h_integral_x1_ - h_integral_n_);
    double x = z.h_integral_inverse(u);
    double k = std::floor(x + 0.5);
    if (k < 1.0)
      k = 1.0;
    if (k > n)
      k = n;
    if (k - x <= s_ || u >= z.h_integral(k + 0.5) - z.h(k))
      return static_cast<uint64_t>(k);
  }
}

double synthetic_generator::id_effect(uint64_t id) const {
  return hash_unit_var(mix64(id ^ mix64(options_.seed ^ 0x1d8e4e27c47d124fULL)));
}

double synthetic_generator::purchase_id_effect(uint64_t id) const {
  return hash_unit_var(mix64(id ^ mix64(options_.seed ^ 0x9e6c63d0676a9a99ULL)));
}

void synthetic_generator::id_latent(uint64_t id, double* out) const {
  uint64_t base = mix64(id ^ mix64(options_.seed ^ 0x7a3f2b1c9d0e5a61ULL));
  for (int k = 0; k < options_.teacher_latent_dim; ++k)
    out[k] = hash_unit_var(mix64(base + static_cast<uint64_t>(k + 1) * golden));
}

batch synthetic_generator::make_batch(data_split split, int64_t index, int batch_size) const {
  SATRAP_ASSERT(index >= 0 && batch_size > 0);
  const int slots = options_.slots, per = options_.ids_per_sample,
            features = options_.dense_features;
  const int latent = options_.teacher_latent_dim;
  batch b;
  b.index = index;
  b.size = batch_size;
  b.slots = slots;
  b.dense_features = features;
  b.tasks = options_.tasks;
  const bool purchase = options_.tasks == 2;
  const double rho = options_.purchase_correlation, rest = std::sqrt(1.0 - rho * rho);
  b.offsets.resize(static_cast<size_t>(batch_size) * slots + 1);
  b.ids.resize(static_cast<size_t>(batch_size) * slots * per);
  b.dense.resize(static_cast<size_t>(batch_size) * features);
  b.labels.resize(static_cast<size_t>(batch_size) * options_.tasks);
  b.probs.resize(static_cast<size_t>(batch_size) * options_.tasks);
  for (size_t k = 0; k < b.offsets.size(); ++k)
    b.offsets[k] = static_cast<uint32_t>(k * per);

  const uint64_t stream = mix64(options_.seed * golden
                                + (split == data_split::train  ? 0x51ed27
                                   : split == data_split::test ? 0x7e57
                                                               : 0x7a11d));
  std::vector<uint64_t> slot_salt(slots);
  for (int s = 0; s < slots; ++s)
    slot_salt[s] = mix64(options_.seed ^ mix64(s + 0x3c6ef372fe94f82bULL));
  std::vector<double> u(static_cast<size_t>(slots) * latent);
  std::vector<double> beta(features);
  for (int f = 0; f < features; ++f)
    beta[f] = hash_unit_var(mix64(options_.seed ^ mix64(f + 0xbb67ae85ULL)));
  std::vector<double> beta2(purchase ? features : 0);
  for (int f = 0; f < static_cast<int>(beta2.size()); ++f)
    beta2[f] = hash_unit_var(mix64(options_.seed ^ mix64(f + 0x3c6ef372ULL)));

  for (int i = 0; i < batch_size; ++i) {
    uint64_t rng = mix64(stream ^ static_cast<uint64_t>(index * batch_size + i));
    double logit = options_.teacher_bias, first = 0.0, first2 = 0.0;
    std::fill(u.begin(), u.end(), 0.0);
    double latent_buf[64];
    SATRAP_ASSERT(latent <= 64);
    for (int s = 0; s < slots; ++s) {
      double* us = u.data() + static_cast<size_t>(s) * latent;
      for (int j = 0; j < per; ++j) {
        uint64_t rank = sample_rank(rng);
        uint64_t id = slot_id_hash(s, mix64(rank ^ slot_salt[s]));
        b.ids[(static_cast<size_t>(i) * slots + s) * per + j] = id;
        first += id_effect(id) / per;
        if (purchase)
          first2 += purchase_id_effect(id) / per;
        id_latent(id, latent_buf);
        for (int k = 0; k < latent; ++k)
          us[k] += latent_buf[k] / per;
      }
    }
    logit += id_scale_ * first;
    // The sum over slot pairs s < t of u_s . u_t, as (|sum_s u_s|^2 - sum_s |u_s|^2) / 2: slots x
    // latent products instead of slots^2 / 2 x latent in one dependent chain of adds (half of
    // make_batch's time at 26 slots). The two agree to ~1e-15 relative; no float prob and no
    // label changed (checked on 2026-12-07 over 819k samples of 1, 3, 8 and 26 slots).
    double pair = 0.0;
    if (slots > 1) {
      double total[64] = {}, self = 0.0;
      for (int s = 0; s < slots; ++s)
        for (int k = 0; k < latent; ++k) {
          double x = u[static_cast<size_t>(s) * latent + k];
          total[k] += x;
          self += x * x;
        }
      double all = 0.0;
      for (int k = 0; k < latent; ++k)
        all += total[k] * total[k];
      pair = 0.5 * (all - self);
    }
    logit += pair_scale_ * pair;
    float* dense = b.dense.data() + static_cast<size_t>(i) * features;
    for (int f = 0; f < features; f += 2) {  // Box-Muller, two normals per pair of uniforms
      double r = std::sqrt(-2.0 * std::log(next_unit(rng))),
             a = 2.0 * std::numbers::pi * next_unit(rng);
      dense[f] = static_cast<float>(r * std::cos(a));
      if (f + 1 < features)
        dense[f + 1] = static_cast<float>(r * std::sin(a));
    }
    double d = 0.0;
    for (int f = 0; f < features; ++f)
      d += beta[f] * dense[f];
    logit += dense_scale_ * d;
    double p = 1.0 / (1.0 + std::exp(-logit));
    if (!purchase) {
      b.probs[i] = static_cast<float>(p);
      b.labels[i] = next_unit(rng) < p ? 1.0f : 0.0f;
      continue;
    }
    double d2 = 0.0;
    for (int f = 0; f < features; ++f)
      d2 += beta2[f] * dense[f];
    const double logit2 = options_.purchase_bias + rho * (logit - options_.teacher_bias)
                          + rest * (id_scale_ * first2 + dense_scale_ * d2);
    const double q = 1.0 / (1.0 + std::exp(-logit2));
    const bool click = next_unit(rng) < p;
    const bool bought = click && next_unit(rng) < q;
    b.probs[2 * static_cast<size_t>(i)] = static_cast<float>(p);
    b.probs[2 * static_cast<size_t>(i) + 1] = static_cast<float>(p * q);
    b.labels[2 * static_cast<size_t>(i)] = click ? 1.0f : 0.0f;
    b.labels[2 * static_cast<size_t>(i) + 1] = bought ? 1.0f : 0.0f;
  }
  return b;
}

}  // namespace satrap
