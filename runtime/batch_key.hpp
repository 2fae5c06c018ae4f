// Which split a batch belongs to, as it travels in small control messages.
#pragma once

#include <cstdint>

#include "models/data/synthetic.hpp"

namespace satrap {

// data_split as a wire value (CAF 0.17 needs registered types; a plain int8 is built in).
inline int8_t split_code(data_split s) { return static_cast<int8_t>(s); }
inline data_split split_of(int8_t code) { return static_cast<data_split>(code); }

// The key of a batch inside an aggregator: batch numbers of the two splits never collide.
inline int64_t batch_key(int64_t batch, int8_t split) { return batch * 3 + split; }

}  // namespace satrap
