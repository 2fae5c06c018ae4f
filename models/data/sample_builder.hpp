// A parsed sample (text_format.hpp's text_sample) appended to a batch as the binary cache lays it
// out (chunk_builder::add in chunk_store.cpp): its ids grouped by slot in slot order, a slot
// without ids given the slot's missing id, weights when the data is weighted (1 for an id
// without one), then its dense values and labels. For readers that make batches without the
// cache: a Kafka stream's messages, a served request's instances.
// Threading: one owner (it keeps scratch space).
#pragma once

#include "models/data/batch.hpp"
#include "models/data/text_format.hpp"

#include <vector>

namespace satrap {

struct sample_builder {
  int slots = 0;
  bool weighted = false;
  std::vector<int> order;  // scratch

  void add(const text_sample& s, batch& b);
};

}  // namespace satrap
