// Feature crosses (Wide&Deep's cross-product transformation): each cross is a list of 2 or more
// sparse slots of the data, and adds one sparse slot whose ids are a 64-bit hash of the crossed
// slots' ids and of the cross's index, so the model sees `slots + crosses` fields with their own
// embeddings and can memorise exact combinations (a user with an item) that a dot product of two
// embeddings only approximates.
//
// The cross slots come after the data's slots, in the order of the crosses: cross c is slot
// `slots + c`. A cross of multi-hot bags holds the ids of their Cartesian product (one id per
// combination, in the order of the bags' ids, the last slot varying fastest), at most
// cross_bag_max ids: a larger product keeps its first cross_bag_max combinations. An empty bag in
// any crossed slot gives an empty cross bag (it pools to zeros).
//
// The same functions add the crosses everywhere a batch is made: crossed_source wraps any batch
// source (synthetic, or file data through its binary cache, so the cache holds the data's slots
// only), and serving adds them to a request's instances before scoring (add_crosses on a
// score_input's layout), so served scores equal evaluation.
// Threading: pure functions; crossed_source is immutable and thread-safe like its inner source.
#pragma once

#include "models/data/batch_source.hpp"
#include "models/result.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace satrap {

using feature_crosses = std::vector<std::vector<int>>;  // each: the crossed slots

inline constexpr size_t cross_bag_max = 1024;  // ids per cross bag at most
inline constexpr size_t crosses_max = 1024;    // crosses per job at most

// An error (bad input) unless every cross names 2 or more distinct slots in [0, slots), and no
// two crosses name the same set of slots. `key` names the setting in messages.
result<ok_t> check_crosses(const feature_crosses& crosses, int slots,
                           const char* key = "data.crosses");

// One cross as text, "[0, 1]" (messages, the job spec's printout).
std::string cross_text(const std::vector<int>& cross);

// The id of one combination: a hash of the crossed ids (in order) and of the cross's index,
// placed in the id space of the cross's slot (`slots + index`).
uint64_t cross_id(int slots, int index, std::span<const uint64_t> ids);

// Appends the cross bags to sample-major bags of `slots` slots: `offsets` (size*slots + 1) and
// `ids` become the layout of `slots + crosses.size()` slots. The crosses must be checked
// (check_crosses) against `slots`.
void add_crosses(const feature_crosses& crosses, int size, int slots,
                 std::vector<uint32_t>& offsets, std::vector<uint64_t>& ids);

// A batch source with the crosses added to every batch of every split.
class crossed_source final : public wrapping_source {
 public:
  // The crosses must be checked against inner->slots().
  crossed_source(std::shared_ptr<const batch_source> inner, feature_crosses crosses);

  batch make_batch(data_split split, int64_t index, int batch_size) const override;
  int slots() const override { return inner_->slots() + static_cast<int>(crosses_.size()); }

 private:
  feature_crosses crosses_;
};

}  // namespace satrap
