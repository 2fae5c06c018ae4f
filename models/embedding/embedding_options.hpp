// Options of one embedding table (one shard's store): row size, initialiser, sparse optimizer,
// precision, capacity, eviction and admission. Threading: plain values.
#pragma once

#include "models/lr_schedule.hpp"

#include <cstdint>

namespace satrap {

enum class sparse_optimizer_kind { sgd, adagrad, rowwise_adagrad, adam, ftrl };
enum class embedding_init_kind { uniform, normal, zeros };
enum class weight_precision { fp32, fp16 };
// What a full table does with a new id: `clock` evicts a row (CLOCK second chance), `none`
// admits no new id until rows are freed (the id reads as its initial row, its gradient is counted).
enum class eviction_kind { clock, none };
// Which unseen ids get a row: all; each sighting with probability p; or from the n-th sighting on
// (counted in a count-min sketch).
enum class admission_kind { all, probability, count_min };
enum class simd_choice { automatic, scalar };  // kernels: AVX2 when the CPU has it, or scalar

struct embedding_options {
  int dim = 16;                                                      // floats per row
  sparse_optimizer_kind optimizer = sparse_optimizer_kind::adagrad;  // sparse optimizer
  float learning_rate = 0.05f;                                       // step size (FTRL: alpha)
  lr_schedule schedule;  // learning_rate x lr_factor(step of the gradient); FTRL: constant only
  float initial_accumulator = 0.0f;  // Adagrad / row-wise Adagrad / FTRL n start value
  float eps = 1e-8f;                 // Adagrad / Adam denominator guard
  float beta1 = 0.9f;                // Adam first-moment decay
  float beta2 = 0.999f;              // Adam second-moment decay
  float ftrl_beta = 1.0f;            // FTRL-Proximal beta (learning-rate smoothing)
  float ftrl_l1 = 0.0f;              // FTRL-Proximal L1 strength
  float ftrl_l2 = 0.0f;              // FTRL-Proximal L2 strength
  float weight_decay = 0.0f;         // L2: g += weight_decay * w before every step
  float clip = 0.0f;                 // > 0: weights clamped to [-clip, clip] after every step
  embedding_init_kind init = embedding_init_kind::uniform;  // initial rows, deterministic per id
  float init_scale = 0.01f;                                 // uniform(-s, s), or normal(0, s)
  uint64_t seed = 0;  // init rows follow from (seed, id); also the admission coin
  weight_precision precision = weight_precision::fp32;  // stored weights (state is always fp32)
  uint64_t capacity = 0;                                // rows at most in this table; 0 = unbounded
  eviction_kind eviction = eviction_kind::clock;        // what a full table does with a new id
  admission_kind admission = admission_kind::all;       // which unseen ids get a row
  float admit_probability = 1.0f;             // admission=probability: chance per sighting
  uint32_t admit_after = 1;                   // admission=count_min: sightings needed (1 = first)
  uint32_t sketch_width = 1u << 20;           // count-min sketch counters per row (16-bit counters)
  uint32_t sketch_depth = 4;                  // count-min sketch rows (independent hashes)
  simd_choice simd = simd_choice::automatic;  // kernel choice (scalar for tests and comparisons)
};

// The initial row of `id`: deterministic per (seed, init, init_scale, id), so the same on any
// shard, after any restart and after resharding.
void embedding_init_row(const embedding_options& options, uint64_t id, float* out);

}  // namespace satrap
