# Embedding store snapshots (models/embedding/embedding_snapshot.hpp).
#
# A snapshot `seq` is a directory `snap-<seq>/` holding one file per shard, `shard-<k>.snap`, and
# a `MANIFEST` written last: a directory without its manifest is an unfinished snapshot and is never
# loaded. A shard file is one SnapshotHeader message followed by `chunks` SnapshotChunk messages
# (flat Cap'n Proto messages, one after the other); the manifest is one SnapshotManifest message.
# Every file ends with a 24-byte trailer: magic "SATSNAP1", the length of what precedes it and a
# 64-bit checksum of it (all little-endian uint64), so truncation and corruption are detected before
# anything is parsed. Rows are the store's bytes, the weights and the optimizer state of an id
# together, so a snapshot can never hold one without the other.
@0xf1ba2ca8d8317a14;

$import "/capnp/c++.capnp".namespace("satrap::schema");

# What the rows are: restore refuses rows of another shape.
struct RowFormat {
  dim @0 :UInt32;
  optimizer @1 :Text;     # sgd | adagrad | rowwise_adagrad | adam | ftrl
  precision @2 :Text;     # fp32 | fp16 (the weights; optimizer state is fp32)
  rowBytes @3 :UInt32;    # bytes per row: weights, then optimizer state
}

struct SnapshotHeader {
  sequence @0 :UInt64;    # this snapshot's number (> 0)
  parent @1 :UInt64;      # the snapshot this one is relative to; 0 for a full snapshot
  shard @2 :UInt32;       # the shard that wrote the file
  format @3 :RowFormat;
  rows @4 :UInt64;        # rows in the chunks
  chunks @5 :UInt32;      # SnapshotChunk messages that follow
  evicted @6 :Data;       # uint64[]: ids dropped since the parent (incremental only)
}

struct SnapshotChunk {
  ids @0 :Data;           # uint64[n]
  rows @1 :Data;          # n x rowBytes
}

struct SnapshotShardFile {
  name @0 :Text;          # file name inside the snapshot directory
  shard @1 :UInt32;
  rows @2 :UInt64;
  bytes @3 :UInt64;       # file size, trailer included
  checksum @4 :UInt64;    # the trailer's checksum
}

struct SnapshotManifest {
  sequence @0 :UInt64;
  parent @1 :UInt64;      # 0: full; else restore `parent` first
  format @2 :RowFormat;
  files @3 :List(SnapshotShardFile);
}
