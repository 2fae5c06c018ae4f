#include "models/data/feature_cross.hpp"

#include "models/embedding/id_map.hpp"

#include <algorithm>
#include <string>

namespace satrap {

std::string cross_text(const std::vector<int>& cross) {
  std::string s = "[";
  for (size_t i = 0; i < cross.size(); ++i)
    s.append(i ? ", " : "").append(std::to_string(cross[i]));
  return s + "]";
}

result<ok_t> check_crosses(const feature_crosses& crosses, int slots, const char* key) {
  if (crosses.size() > crosses_max)
    return make_input_error(std::string(key) + ": expected at most " + std::to_string(crosses_max)
                            + " crosses, got " + std::to_string(crosses.size()));
  std::vector<std::vector<int>> seen;
  for (size_t c = 0; c < crosses.size(); ++c) {
    auto& cross = crosses[c];
    auto where = std::string(key) + "[" + std::to_string(c) + "] " + cross_text(cross);
    if (cross.size() < 2)
      return make_input_error(where + ": expected 2 or more slots to cross");
    for (auto s : cross)
      if (s < 0 || s >= slots)
        return make_input_error(where + ": expected slots in [0, " + std::to_string(slots)
                                + ") (the data's sparse slots), got " + std::to_string(s));
    auto sorted = cross;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return make_input_error(where + ": expected distinct slots (a slot crossed with itself)");
    if (std::find(seen.begin(), seen.end(), sorted) != seen.end())
      return make_input_error(where
                              + ": expected each set of slots crossed once (a duplicate cross)");
    seen.push_back(std::move(sorted));
  }
  return ok_t{};
}

uint64_t cross_id(int slots, int index, std::span<const uint64_t> ids) {
  uint64_t h = mix64(static_cast<uint64_t>(index) * 0xd1b54a32d192ed03ULL + 0x8cb92ba72f3d8dd7ULL);
  for (auto id : ids)
    h = mix64(h ^ mix64(id + 0x9e3779b97f4a7c15ULL));
  return slot_id_hash(slots + index, h);
}

void add_crosses(const feature_crosses& crosses, int size, int slots,
                 std::vector<uint32_t>& offsets, std::vector<uint64_t>& ids) {
  if (crosses.empty())
    return;
  const auto n = static_cast<size_t>(slots);
  const auto total = n + crosses.size();
  std::vector<uint32_t> out_offsets;
  std::vector<uint64_t> out_ids;
  out_offsets.reserve(static_cast<size_t>(size) * total + 1);
  out_ids.reserve(ids.size() + static_cast<size_t>(size) * crosses.size());
  out_offsets.push_back(0);
  std::vector<size_t> at;       // the combination: an index into each crossed bag
  std::vector<uint64_t> combo;  // its ids
  for (size_t i = 0; i < static_cast<size_t>(size); ++i) {
    const auto bag = [&](int s) { return i * n + static_cast<size_t>(s); };
    for (size_t s = 0; s < n; ++s) {
      out_ids.insert(out_ids.end(), ids.begin() + offsets[bag(static_cast<int>(s))],
                     ids.begin() + offsets[bag(static_cast<int>(s)) + 1]);
      out_offsets.push_back(static_cast<uint32_t>(out_ids.size()));
    }
    for (size_t c = 0; c < crosses.size(); ++c) {
      auto& cross = crosses[c];
      bool empty = false;
      for (auto s : cross)
        empty |= offsets[bag(s)] == offsets[bag(s) + 1];
      if (!empty) {
        at.assign(cross.size(), 0);
        combo.resize(cross.size());
        for (size_t made = 0; made < cross_bag_max; ++made) {
          for (size_t k = 0; k < cross.size(); ++k)
            combo[k] = ids[offsets[bag(cross[k])] + at[k]];
          out_ids.push_back(cross_id(slots, static_cast<int>(c), combo));
          bool done = true;  // the next combination: the last slot varies fastest
          for (size_t k = cross.size(); k-- > 0;) {
            if (++at[k] < offsets[bag(cross[k]) + 1] - offsets[bag(cross[k])]) {
              done = false;
              break;
            }
            at[k] = 0;
          }
          if (done)
            break;
        }
      }
      out_offsets.push_back(static_cast<uint32_t>(out_ids.size()));
    }
  }
  offsets = std::move(out_offsets);
  ids = std::move(out_ids);
}

crossed_source::crossed_source(std::shared_ptr<const batch_source> inner, feature_crosses crosses)
    : wrapping_source(std::move(inner)), crosses_(std::move(crosses)) {
  SATRAP_ASSERT(check_crosses(crosses_, inner_->slots()).ok(), "crossed_source: unchecked crosses");
}

batch crossed_source::make_batch(data_split split, int64_t index, int batch_size) const {
  auto b = inner_->make_batch(split, index, batch_size);
  add_crosses(crosses_, b.size, b.slots, b.offsets, b.ids);
  b.slots += static_cast<int>(crosses_.size());
  return b;
}

}  // namespace satrap
