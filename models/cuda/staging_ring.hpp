// The bookkeeping of cuda_dense_model's double-buffered batch uploads, as plain C++ with no CUDA in
// it so that its state machine is unit-tested on any machine (tests/models/staging_ring_test.cpp).
//
// A ring of `slots` staging slots; each slot holds one batch's inputs (pinned host buffers and
// device buffers in cuda_dense_model) and goes
//   free --stage(key)--> staged --begin_compute(key)--> computing --finish()--> free
// `staged` means: its host-to-device copy is enqueued on the copy stream (an event marks its end);
// `computing` means: the compute stream reads its device buffers (one slot at a time). A batch is
// staged at most once (keys are the trainer's step numbers); drop_before(key) frees staged slots
// of older keys (a step that will not be computed, e.g. after a rollback) and clear() frees all
// but the computing one's mark (used after an error: nothing staged is trusted any more).
// Threading: not thread-safe; owned with its model.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "models/assert.hpp"

namespace satrap {

class staging_ring {
 public:
  enum class slot_state { free, staged, computing };

  explicit staging_ring(int slots = 2) : slots_(static_cast<size_t>(slots)) {
    SATRAP_ASSERT(slots >= 1, "staging_ring: {} slots", slots);
  }

  int size() const { return static_cast<int>(slots_.size()); }
  slot_state state(int slot) const { return at(slot).state; }
  int64_t key(int slot) const { return at(slot).key; }

  // The slot that holds `key` staged (not computing), if any.
  std::optional<int> find(int64_t key) const {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].state == slot_state::staged && slots_[i].key == key)
        return static_cast<int>(i);
    return std::nullopt;
  }
  bool has(int64_t key) const { return find(key).has_value(); }
  int free_slots() const {
    int n = 0;
    for (auto& s : slots_)
      n += s.state == slot_state::free ? 1 : 0;
    return n;
  }
  bool computing() const { return computing_ >= 0; }

  // A free slot for `key`, now staged; none when every slot is busy. `key` must not be staged.
  std::optional<int> stage(int64_t key) {
    SATRAP_ASSERT(!has(key), "staging_ring: key {} staged twice", key);
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].state == slot_state::free) {
        slots_[i] = {slot_state::staged, key};
        return static_cast<int>(i);
      }
    return std::nullopt;
  }
  // The staged slot of `key` becomes the computing one (none may be computing).
  int begin_compute(int64_t key) {
    SATRAP_ASSERT(computing_ < 0, "staging_ring: slot {} still computing", computing_);
    auto slot = find(key);
    SATRAP_ASSERT(slot.has_value(), "staging_ring: key {} is not staged", key);
    slots_[static_cast<size_t>(*slot)].state = slot_state::computing;
    computing_ = *slot;
    return *slot;
  }
  // The computing slot's batch is done (its device buffers are no longer read): free again.
  void finish() {
    SATRAP_ASSERT(computing_ >= 0, "staging_ring: finish without a computing slot");
    slots_[static_cast<size_t>(computing_)] = {};
    computing_ = -1;
  }
  // Frees the staged slot of `key`, if any (its upload failed).
  void drop(int64_t key) {
    if (auto slot = find(key))
      slots_[static_cast<size_t>(*slot)] = {};
  }
  // Frees the staged slots whose key is below `key`; returns how many.
  int drop_before(int64_t key) {
    int n = 0;
    for (auto& s : slots_)
      if (s.state == slot_state::staged && s.key < key) {
        s = {};
        ++n;
      }
    return n;
  }
  // Frees every slot (the caller has waited for the streams or given up on them).
  void clear() {
    for (auto& s : slots_)
      s = {};
    computing_ = -1;
  }

 private:
  struct slot {
    slot_state state = slot_state::free;
    int64_t key = -1;
  };
  const slot& at(int i) const {
    SATRAP_ASSERT(i >= 0 && static_cast<size_t>(i) < slots_.size(), "staging_ring: slot {}", i);
    return slots_[static_cast<size_t>(i)];
  }
  std::vector<slot> slots_;
  int computing_ = -1;
};

}  // namespace satrap
