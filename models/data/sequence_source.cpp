#include "models/data/sequence_source.hpp"

#include "models/assert.hpp"

#include <algorithm>

namespace satrap {

std::vector<pooling> unpooled_sequences::model_pooling(const std::vector<pooling>& input) const {
  if (empty())
    return input;
  std::vector<pooling> out;
  for (int s = 0; s < static_cast<int>(input.size()); ++s)
    if (std::find(slots.begin(), slots.end(), s) == slots.end())
      out.push_back(input[static_cast<size_t>(s)]);
  out.insert(out.end(), static_cast<size_t>(positions()), pooling::sum);
  return out;
}

batch expand_sequences(const batch& in, const unpooled_sequences& seq) {
  if (seq.empty())
    return in;
  const int k_count = static_cast<int>(seq.slots.size());
  SATRAP_ASSERT(seq.lengths.size() == seq.slots.size() && seq.slots.back() < in.slots
                  && in.offsets.size() == static_cast<size_t>(in.size) * in.slots + 1,
                "sequences={} slots={} offsets={}", k_count, in.slots, in.offsets.size());
  std::vector<char> is_seq(static_cast<size_t>(in.slots), 0);
  for (int s : seq.slots)
    is_seq[static_cast<size_t>(s)] = 1;
  const bool weighted = !in.weights.empty();
  batch out;
  out.index = in.index;
  out.size = in.size;
  out.slots = seq.model_slots(in.slots);
  out.dense_features = seq.model_dense(in.dense_features);
  out.tasks = in.tasks;
  out.labels = in.labels;
  out.probs = in.probs;
  out.offsets.reserve(static_cast<size_t>(out.size) * out.slots + 1);
  out.ids.reserve(in.ids.size());
  if (weighted)
    out.weights.reserve(in.ids.size());
  out.dense.resize(static_cast<size_t>(out.size) * out.dense_features);
  out.offsets.push_back(0);
  auto push_ids = [&](uint32_t from, uint32_t to) {
    out.ids.insert(out.ids.end(), in.ids.begin() + from, in.ids.begin() + to);
    if (weighted)
      out.weights.insert(out.weights.end(), in.weights.begin() + from, in.weights.begin() + to);
    out.offsets.push_back(static_cast<uint32_t>(out.ids.size()));
  };
  for (int i = 0; i < in.size; ++i) {
    const uint32_t* bag = in.offsets.data() + static_cast<size_t>(i) * in.slots;
    for (int s = 0; s < in.slots; ++s)
      if (!is_seq[static_cast<size_t>(s)])
        push_ids(bag[s], bag[s + 1]);
    float* dense = out.dense.data() + static_cast<size_t>(i) * out.dense_features;
    std::copy_n(in.dense.data() + static_cast<size_t>(i) * in.dense_features, in.dense_features,
                dense);
    for (int k = 0; k < k_count; ++k) {
      const int s = seq.slots[static_cast<size_t>(k)], len = seq.lengths[static_cast<size_t>(k)];
      const uint32_t end = bag[s + 1];
      const uint32_t begin = std::max(bag[s], end >= static_cast<uint32_t>(len) ? end - len : 0u);
      for (uint32_t at = begin; at < end; ++at)
        push_ids(at, at + 1);
      for (int j = static_cast<int>(end - begin); j < len; ++j)
        out.offsets.push_back(static_cast<uint32_t>(out.ids.size()));
      dense[in.dense_features + k] = static_cast<float>(end - begin);
    }
  }
  SATRAP_ASSERT(out.offsets.size() == static_cast<size_t>(out.size) * out.slots + 1,
                "offsets={} size={} slots={}", out.offsets.size(), out.size, out.slots);
  return out;
}

sequence_source::sequence_source(std::shared_ptr<const batch_source> inner, unpooled_sequences seq)
    : wrapping_source(std::move(inner)), seq_(std::move(seq)) {
  SATRAP_ASSERT(!seq_.empty() && seq_.slots.back() < inner_->slots());
}

}  // namespace satrap
