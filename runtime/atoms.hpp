// The atoms of satrap's typed messages, shared by every role (a CAF 0.17 atom is at most 10 chars).
#pragma once

#include <caf/atom.hpp>

namespace satrap {

using lookup_atom = caf::atom_constant<caf::atom("lookup")>;
using update_atom = caf::atom_constant<caf::atom("update")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;
using ids_atom = caf::atom_constant<caf::atom("ids")>;
using pooled_atom = caf::atom_constant<caf::atom("pooled")>;
using grads_atom = caf::atom_constant<caf::atom("grads")>;
using chunk_atom = caf::atom_constant<caf::atom("chunk")>;
using applied_atom = caf::atom_constant<caf::atom("applied")>;
using peers_atom = caf::atom_constant<caf::atom("peers")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using params_atom = caf::atom_constant<caf::atom("params")>;
using progress_atom = caf::atom_constant<caf::atom("progress")>;

}  // namespace satrap
