// The write buffer CAF 0.17's brokers keep for connections they no longer have. A broker's
// wr_buf(hdl) for a handle without a connection (abstract_broker.cpp) answers one spare buffer,
// dummy_wr_buf_, which nothing ever sends, clears or shrinks. BASP writes there whatever it
// dispatches to a peer between that peer's connection closing and its route being removed (a
// node killed mid-training: what its peers were still sending it), kept for the life of the
// process and added to at every lost peer. Seen holding 111 bytes on the soak's head after a
// kill; it was a suspect for the 1.5-2.5 MiB per peer kill that node-0 kept in earlier soak runs,
// a growth this session's runs did not show (README, "Tests").
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
