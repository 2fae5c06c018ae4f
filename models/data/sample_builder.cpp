#include "models/data/sample_builder.hpp"

#include <algorithm>

namespace satrap {

void sample_builder::add(const text_sample& s, batch& b) {
  order.resize(s.features.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return s.features[x].first < s.features[y].first; });
  size_t k = 0;
  for (int slot = 0; slot < slots; ++slot) {
    auto before = b.ids.size();
    for (; k < order.size() && s.features[order[k]].first == slot; ++k) {
      b.ids.push_back(s.features[order[k]].second);
      if (weighted)
        b.weights.push_back(s.weights.empty() ? 1.0f : s.weights[static_cast<size_t>(order[k])]);
    }
    if (b.ids.size() == before) {
      b.ids.push_back(missing_id(slot));
      if (weighted)
        b.weights.push_back(1.0f);
    }
    b.offsets.push_back(static_cast<uint32_t>(b.ids.size()));
  }
  b.dense.insert(b.dense.end(), s.dense.begin(), s.dense.end());
  b.labels.push_back(s.label);
  b.labels.insert(b.labels.end(), s.more_labels.begin(), s.more_labels.end());
  ++b.size;
}

}  // namespace satrap
