// Which split a batch belongs to, as it travels in small control messages.
#pragma once

#include <cstdint>

#include "models/data/synthetic.hpp"

namespace satrap {

// data_split as a wire value (CAF 0.17 needs registered types; a plain int8 is built in).
inline int8_t split_code(data_split s) { return s == data_split::train ? 0 : 1; }
inline data_split split_of(int8_t code) { return code == 0 ? data_split::train : data_split::test; }

// The key of a batch inside an aggregator: batch numbers of the two splits never collide.
inline int64_t batch_key(int64_t batch, int8_t split) { return batch * 2 + split; }

}  // namespace satrap
