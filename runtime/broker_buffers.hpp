// The write buffer CAF 0.17's brokers keep for connections they no longer have. A broker's
// wr_buf(hdl) for a handle without a connection (abstract_broker.cpp) answers one spare buffer,
// dummy_wr_buf_, which nothing ever sends, clears or shrinks. BASP writes there whatever it
// dispatches to a peer between that peer's connection closing and its route being removed: when
// a node is killed mid-training, the batches its peers were sending it (1.5-2.5 MiB a kill on
// node-0 in the soak), kept for the life of the process, one more lot every lost peer.
// broker_buffers_release() empties that buffer of the BASP broker (the plain and the TLS
// middleman share it), in the middleman's event loop where the broker runs, then calls
// memory_release(why) there; without a middleman it only calls memory_release(why).
// Threading: any thread; the work runs later, in the middleman's thread.
#pragma once

#include <caf/fwd.hpp>

#include <string>

namespace satrap {

void broker_buffers_release(caf::actor_system& sys, std::string why);

}  // namespace satrap
