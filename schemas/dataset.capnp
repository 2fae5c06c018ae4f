# The binary cache of a text data set (see models/data/dataset_cache.hpp).
#
# A text data set (Criteo TSV, libsvm/libfm, libffm, JSON lines; plain or gzip) is converted once into chunk
# files, each one DatasetChunk message of up to `chunk_samples` samples, plus a DatasetManifest
# written last. Training reads samples from the chunks in place (mmap), by sample number, so any
# loader can make any batch. Arrays are little-endian `Data` blobs read with one memcpy or in place.
@0xe36c1d521aadce11;

$import "/capnp/c++.capnp".namespace("satrap::schema");

# Samples of one chunk, sample-major like a batch: bag b = sample*slots + slot.
struct DatasetChunk {
  samples @0 :UInt32;
  slots @1 :UInt32;
  denseFeatures @2 :UInt32;
  offsets @3 :Data;       # uint32[samples*slots + 1]
  ids @4 :Data;           # uint64[offsets[last]], hashed into their slot's id space
  dense @5 :Data;         # float32[samples*denseFeatures]
  labels @6 :Data;        # float32[samples*tasks], 0 or 1, sample-major (tasks: the manifest's)
  weights @7 :Data;       # float32[offsets[last]]: each id's pooling weight (a weighted data set:
                          # the manifest's `weighted`), else empty
}

struct ChunkEntry {
  file @0 :Text;          # chunk file name, relative to the manifest's folder
  samples @1 :UInt32;
}

struct SkipCount {
  reason @0 :Text;        # e.g. bad_label, too_few_fields (see text_format.hpp)
  count @1 :UInt64;
}

# Written last: a cache without a manifest is incomplete and is rebuilt.
struct DatasetManifest {
  version @0 :UInt32;     # cache layout version
  key @1 :Text;           # what was converted: sources (path, size, mtime) and format options
  slots @2 :UInt32;
  denseFeatures @3 :UInt32;
  samples @4 :UInt64;
  chunks @5 :List(ChunkEntry);   # in source-file order, then line order
  skipped @6 :List(SkipCount);   # lines skipped under on_error: skip, by reason
  lines @7 :UInt64;              # text lines read (blank lines included)
  parseSeconds @8 :Float64;      # wall time of the conversion
  textBytes @9 :UInt64;          # bytes of text parsed (uncompressed)
  weighted @10 :Bool;            # every chunk carries weights (JSON lines with weights: true)
  tasks @11 :UInt32;             # labels per sample (data.labels); 0 is read as 1 (older caches)
}
