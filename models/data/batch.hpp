// One mini-batch of click data, as loaders produce it and trainers consume it.
// Threading: a plain value type; no shared state. slot_id_hash is pure and thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace satrap {

// One mini-batch. Ids are multi-hot bags, sample-major: bag b = sample*slots + slot holds
// ids[offsets[b] .. offsets[b+1]). offsets.size() == size*slots + 1.
struct batch {
  int64_t index = 0;  // batch number within its split
  int size = 0;       // samples
  int slots = 0;
  int dense_features = 0;
  int tasks = 1;  // labels per sample (data.labels)
  std::vector<uint32_t> offsets;
  std::vector<uint64_t> ids;   // 64-bit ids, already hashed into their table's id space
  std::vector<float> weights;  // empty (every id weighs 1), or ids.size() pooling weights
  std::vector<float> dense;    // size x dense_features, row-major
  std::vector<float> labels;   // size x tasks, sample-major, 0 or 1
  std::vector<float> probs;    // size x tasks, the teacher's true probability of each label
                               // (synthetic data only; else empty)
};

// A strong 64-bit mix of (slot, value): the id a raw feature value has in its slot's id space.
uint64_t slot_id_hash(int slot, uint64_t value);

}  // namespace satrap
