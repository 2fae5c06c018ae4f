// The decoder of a snapshot's MANIFEST (schemas/snapshot.capnp), checked before a restore trusts it.
//
// A manifest is read from disk, written by another process (possibly another satrap version, or
// damaged in a way the checksum of its trailer did not catch). Nothing in it is used unchecked:
// it must be exactly one well-formed message; its sequence > 0 and its parent older; the row
// format plausible (dim >= 1, at least 2 bytes per weight); every file name a plain name inside
// the snapshot's directory (no '/', no "..": a manifest cannot make a restore open another file),
// and no name twice. The format is compared with the table's by the restore
// (snapshot_format_mismatch).
// Threading: a plain function.
#pragma once

#include "models/embedding/embedding_snapshot.hpp"
#include "models/result.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace satrap {

struct snapshot_manifest {
  uint64_t sequence = 0;
  uint64_t parent = 0;  // 0: a full snapshot
  uint32_t dim = 0;
  std::string optimizer;
  std::string precision;
  uint32_t row_bytes = 0;
  std::vector<snapshot_file_info> files;
};

// `bytes`: the file's payload (its trailer already checked and cut), 8-byte aligned.
result<snapshot_manifest> snapshot_manifest_decode(std::span<const std::byte> bytes);

// "" when the manifest's rows fit a table of these options, else what differs.
std::string snapshot_format_mismatch(const snapshot_manifest& m, const embedding_options& o);

}  // namespace satrap
