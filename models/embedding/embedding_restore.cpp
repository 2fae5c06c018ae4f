// snapshot_restore: manifests first (the chain back to a full snapshot), then every shard file of
// every snapshot in the chain, oldest first, each checked before it is parsed.
#include <cstring>
#include <filesystem>
#include <optional>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "models/embedding/embedding_snapshot.hpp"
#include "models/embedding/snapshot_file.hpp"
#include "models/embedding/snapshot_manifest.hpp"
#include "satrap_schemas/snapshot.capnp.h"

namespace satrap {

std::string snapshot_format_mismatch(schema::RowFormat::Reader f, const embedding_options& o);

namespace {

namespace fs = std::filesystem;

// Flat messages one after another in a checked file.
class message_cursor {
 public:
  explicit message_cursor(const mapped_file& f)
      : pos_(reinterpret_cast<const capnp::word*>(f.payload())),
        end_(pos_ + f.payload_bytes() / sizeof(capnp::word)) {
    options_.traversalLimitInWords = static_cast<uint64_t>(end_ - pos_) + 1024;
  }
  bool done() const { return pos_ == end_; }
  // The next message (valid until the following call). Throws kj::Exception when malformed.
  capnp::FlatArrayMessageReader& next() {
    reader_.emplace(kj::arrayPtr(pos_, end_), options_);
    pos_ = reader_->getEnd();
    return *reader_;
  }

 private:
  const capnp::word* pos_;
  const capnp::word* end_;
  capnp::ReaderOptions options_;
  std::optional<capnp::FlatArrayMessageReader> reader_;
};

struct manifest_file {
  std::string dir;
  mapped_file file;
  snapshot_manifest manifest;  // decoded and checked
};

result<manifest_file> open_manifest(const std::string& root, uint64_t sequence, env& e) {
  std::string dir = snapshot_dir(root, sequence);
  std::string path = (fs::path(dir) / "MANIFEST").string();
  if (!e.exists(path))
    return make_model_error(dir + ": no MANIFEST: snapshot " + std::to_string(sequence)
                            + " is missing or was never completed, so it is not loaded");
  auto f = mapped_file::open(path, 0, 0, e);
  if (!f)
    return make_model_error(f.error());
  auto m = snapshot_manifest_decode({f->payload(), f->payload_bytes()});
  if (!m)
    return make_model_error(path + ": " + m.error());
  return manifest_file{dir, std::move(f.value()), std::move(m.value())};
}

uint64_t read_u64(const kj::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Applies one shard file; "" on success, else what was wrong (the caller adds the path).
std::string apply_shard_file(embedding_table& table, const mapped_file& f,
                             const snapshot_manifest& manifest, const snapshot_keep& keep,
                             snapshot_restore_stats& stats) {
  message_cursor cursor(f);
  if (cursor.done())
    return "empty file";
  auto h = cursor.next().getRoot<schema::SnapshotHeader>();
  if (h.getSequence() != manifest.sequence || h.getParent() != manifest.parent)
    return "header says snapshot " + std::to_string(h.getSequence()) + " (parent "
           + std::to_string(h.getParent()) + "), the manifest " + std::to_string(manifest.sequence);
  if (auto why = snapshot_format_mismatch(h.getFormat(), table.options()); !why.empty())
    return why;
  const size_t stride = table.layout().stride;
  auto evicted = h.getEvicted();
  if (evicted.size() % 8 != 0)
    return "evicted ids: " + std::to_string(evicted.size()) + " bytes";
  for (size_t i = 0; i < evicted.size(); i += 8) {
    uint64_t id = read_u64(evicted.begin() + i);
    if (!keep || keep(id))
      table.restore_erase(id);
  }
  uint64_t rows = 0, want = h.getRows();
  for (uint32_t c = 0; c < h.getChunks(); ++c) {
    if (cursor.done())
      return "chunk " + std::to_string(c) + " of " + std::to_string(h.getChunks()) + " missing";
    auto chunk = cursor.next().getRoot<schema::SnapshotChunk>();
    auto ids = chunk.getIds();
    auto bytes = chunk.getRows();
    size_t n = ids.size() / 8;
    if (ids.size() % 8 != 0 || bytes.size() != n * stride)
      return "chunk " + std::to_string(c) + ": " + std::to_string(ids.size()) + " id bytes and "
             + std::to_string(bytes.size()) + " row bytes do not match " + std::to_string(stride)
             + " bytes per row";
    for (size_t i = 0; i < n; ++i) {
      uint64_t id = read_u64(ids.begin() + i * 8);
      if (keep && !keep(id))
        continue;
      if (!table.restore_row(id, reinterpret_cast<const std::byte*>(bytes.begin()) + i * stride))
        return "the table's capacity (" + std::to_string(table.options().capacity)
               + " rows) is too small for the snapshot's rows";
      ++stats.rows_kept;
    }
    rows += n;
  }
  if (rows != want || !cursor.done())
    return "holds " + std::to_string(rows) + " rows in its chunks, its header says "
           + std::to_string(want);
  stats.rows_read += rows;
  ++stats.files;
  return "";
}

// Applies every shard file of one snapshot; "" or "path: what".
std::string apply_snapshot(embedding_table& table, const manifest_file& mf,
                           const snapshot_keep& keep, snapshot_restore_stats& stats, env& e) {
  for (auto& entry : mf.manifest.files) {
    std::string path = (fs::path(mf.dir) / entry.name).string();
    auto f = mapped_file::open(path, entry.bytes, entry.checksum, e);
    if (!f)
      return f.error();
    std::string why;
    try {
      why = apply_shard_file(table, f.value(), mf.manifest, keep, stats);
    } catch (const kj::Exception& e) {
      why = std::string("malformed: ") + e.getDescription().cStr();
    }
    if (!why.empty())
      return path + ": " + why;
  }
  ++stats.snapshots;
  return "";
}

}  // namespace

result<uint64_t> snapshot_parent(const std::string& root, uint64_t sequence, env& e) {
  auto mf = open_manifest(root, sequence, e);
  if (!mf)
    return make_model_error(mf.error());
  if (mf->manifest.sequence != sequence || mf->manifest.parent >= sequence)
    return make_model_error(mf->dir + "/MANIFEST: sequence " + std::to_string(mf->manifest.sequence)
                            + ", parent " + std::to_string(mf->manifest.parent) + ": not a chain");
  return mf->manifest.parent;
}

result<snapshot_restore_stats> snapshot_restore(embedding_table& table, const std::string& root,
                                                uint64_t sequence, const snapshot_keep& keep,
                                                env& e) {
  if (table.size() != 0)
    return make_model_error("snapshot restore: the table must be empty");
  std::vector<manifest_file> chain;  // newest first
  for (uint64_t seq = sequence;;) {
    auto mf = open_manifest(root, seq, e);
    if (!mf)
      return make_model_error(mf.error());
    const auto& m = mf->manifest;
    if (m.sequence != seq)
      return make_model_error(mf->dir + "/MANIFEST: says snapshot " + std::to_string(m.sequence));
    if (auto why = snapshot_format_mismatch(m, table.options()); !why.empty())
      return make_model_error(mf->dir + "/MANIFEST: " + why);
    uint64_t parent = m.parent;
    if (parent >= seq)
      return make_model_error(mf->dir + "/MANIFEST: parent " + std::to_string(parent)
                              + " is not older");
    chain.push_back(std::move(mf.value()));
    if (parent == 0)
      break;
    seq = parent;
  }
  snapshot_restore_stats stats;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (auto why = apply_snapshot(table, *it, keep, stats, e); !why.empty()) {
      table.clear();
      return make_model_error(why);
    }
  }
  table.mark_snapshot(sequence);
  return stats;
}

}  // namespace satrap
