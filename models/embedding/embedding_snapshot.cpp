#include "models/embedding/embedding_snapshot.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "models/embedding/snapshot_file.hpp"
#include "models/embedding/snapshot_manifest.hpp"
#include "models/io_cause.hpp"
#include "satrap_schemas/snapshot.capnp.h"

namespace satrap {

namespace {

namespace fs = std::filesystem;
constexpr size_t chunk_rows = size_t{1} << 16;

const char* optimizer_name(sparse_optimizer_kind k) {
  switch (k) {
    case sparse_optimizer_kind::sgd: return "sgd";
    case sparse_optimizer_kind::adagrad: return "adagrad";
    case sparse_optimizer_kind::rowwise_adagrad: return "rowwise_adagrad";
    case sparse_optimizer_kind::adam: return "adam";
    case sparse_optimizer_kind::ftrl: return "ftrl";
  }
  return "?";
}

void set_format(schema::RowFormat::Builder f, const embedding_options& o) {
  auto layout = row_layout::of(o);
  f.setDim(static_cast<uint32_t>(o.dim));
  f.setOptimizer(optimizer_name(o.optimizer));
  f.setPrecision(layout.fp16 ? "fp16" : "fp32");
  f.setRowBytes(static_cast<uint32_t>(layout.stride));
}

std::string format_text(uint32_t dim, const std::string& opt, const std::string& prec,
                        uint32_t bytes) {
  return "dim " + std::to_string(dim) + ", " + opt + ", " + prec + ", " + std::to_string(bytes)
         + " bytes per row";
}

}  // namespace

// "" when the snapshot's rows fit the table, else what differs (shared with the restore).
std::string snapshot_format_mismatch(schema::RowFormat::Reader f, const embedding_options& o) {
  auto layout = row_layout::of(o);
  std::string want =
    format_text(static_cast<uint32_t>(o.dim), optimizer_name(o.optimizer),
                layout.fp16 ? "fp16" : "fp32", static_cast<uint32_t>(layout.stride));
  std::string got =
    format_text(f.getDim(), f.getOptimizer().cStr(), f.getPrecision().cStr(), f.getRowBytes());
  return got == want ? "" : "rows are " + got + "; the table expects " + want;
}

std::string snapshot_format_mismatch(const snapshot_manifest& m, const embedding_options& o) {
  auto layout = row_layout::of(o);
  std::string want =
    format_text(static_cast<uint32_t>(o.dim), optimizer_name(o.optimizer),
                layout.fp16 ? "fp16" : "fp32", static_cast<uint32_t>(layout.stride));
  std::string got = format_text(m.dim, m.optimizer, m.precision, m.row_bytes);
  return got == want ? "" : "rows are " + got + "; the table expects " + want;
}

namespace {

void append_message(snapshot_file_writer& w, capnp::MessageBuilder& mb) {
  auto flat = capnp::messageToFlatArray(mb);
  w.append(flat.begin(), flat.size() * sizeof(capnp::word));
}

std::string shard_file_name(uint32_t shard) { return "shard-" + std::to_string(shard) + ".snap"; }

// Writes buffered rows as one SnapshotChunk message.
void flush_chunk(snapshot_file_writer& w, std::vector<uint64_t>& ids,
                 std::vector<std::byte>& rows) {
  if (ids.empty())
    return;
  capnp::MallocMessageBuilder mb(static_cast<unsigned>((rows.size() + ids.size() * 8) / 8 + 64));
  auto chunk = mb.initRoot<schema::SnapshotChunk>();
  chunk.setIds(kj::arrayPtr(reinterpret_cast<const kj::byte*>(ids.data()), ids.size() * 8));
  chunk.setRows(kj::arrayPtr(reinterpret_cast<const kj::byte*>(rows.data()), rows.size()));
  append_message(w, mb);
  ids.clear();
  rows.clear();
}

}  // namespace

std::string snapshot_dir(const std::string& root, uint64_t sequence) {
  char name[32];
  std::snprintf(name, sizeof name, "snap-%08llu", static_cast<unsigned long long>(sequence));
  return (fs::path(root) / name).string();
}

result<snapshot_file_info> snapshot_write_shard(embedding_table& table, const std::string& root,
                                                uint64_t sequence, uint32_t shard,
                                                snapshot_kind kind, env& e) {
  const bool incremental = kind == snapshot_kind::incremental;
  const uint64_t parent = incremental ? table.snapshot_sequence() : 0;
  if (incremental && parent == 0)
    return make_model_error("snapshot " + std::to_string(sequence) + " shard "
                            + std::to_string(shard)
                            + ": incremental needs a previous snapshot of this table");
  if (sequence <= table.snapshot_sequence())
    return make_model_error("snapshot " + std::to_string(sequence)
                            + ": sequence must exceed the table's last ("
                            + std::to_string(table.snapshot_sequence()) + ")");
  std::string dir = snapshot_dir(root, sequence);
  if (auto made = e.create_dirs(dir); !made)
    return make_model_error(dir + ": cannot create snapshot directory: " + io_cause(made.error()));

  snapshot_file_info info;
  info.name = shard_file_name(shard);
  info.shard = shard;
  info.rows = incremental ? table.changed_rows() : table.size();
  snapshot_file_writer w((fs::path(dir) / info.name).string(), e);
  {
    capnp::MallocMessageBuilder mb;
    auto h = mb.initRoot<schema::SnapshotHeader>();
    h.setSequence(sequence);
    h.setParent(parent);
    h.setShard(shard);
    set_format(h.initFormat(), table.options());
    h.setRows(info.rows);
    h.setChunks(static_cast<uint32_t>((info.rows + chunk_rows - 1) / chunk_rows));
    const auto& evicted = table.evicted_since_snapshot();
    if (incremental)
      h.setEvicted(
        kj::arrayPtr(reinterpret_cast<const kj::byte*>(evicted.data()), evicted.size() * 8));
    append_message(w, mb);
  }
  const size_t stride = table.layout().stride;
  std::vector<uint64_t> ids;
  std::vector<std::byte> rows;
  ids.reserve(std::min<size_t>(chunk_rows, info.rows));
  rows.reserve(ids.capacity() * stride);
  table.for_each_row(incremental, [&](uint64_t id, const std::byte* row) {
    ids.push_back(id);
    rows.insert(rows.end(), row, row + stride);
    if (ids.size() == chunk_rows)
      flush_chunk(w, ids, rows);
  });
  flush_chunk(w, ids, rows);
  auto written = w.finish();
  if (!written)
    return make_model_error(written.error());
  info.bytes = written->bytes;
  info.checksum = written->checksum;
  table.mark_snapshot(sequence);
  return info;
}

result<ok_t> snapshot_write_manifest(const std::string& root, uint64_t sequence, uint64_t parent,
                                     const embedding_options& options,
                                     std::span<const snapshot_file_info> files, env& e) {
  capnp::MallocMessageBuilder mb;
  auto m = mb.initRoot<schema::SnapshotManifest>();
  m.setSequence(sequence);
  m.setParent(parent);
  set_format(m.initFormat(), options);
  auto list = m.initFiles(static_cast<unsigned>(files.size()));
  for (size_t i = 0; i < files.size(); ++i) {
    auto f = list[static_cast<unsigned>(i)];
    f.setName(files[i].name);
    f.setShard(files[i].shard);
    f.setRows(files[i].rows);
    f.setBytes(files[i].bytes);
    f.setChecksum(files[i].checksum);
  }
  snapshot_file_writer w((fs::path(snapshot_dir(root, sequence)) / "MANIFEST").string(), e);
  append_message(w, mb);
  auto written = w.finish();
  if (!written)
    return make_model_error(written.error());
  return ok_t{};
}

result<ok_t> snapshot_write(std::span<embedding_table* const> tables, const std::string& root,
                            uint64_t sequence, snapshot_kind kind, env& e) {
  if (tables.empty())
    return make_model_error("snapshot: no tables");
  uint64_t parent = kind == snapshot_kind::full ? 0 : tables[0]->snapshot_sequence();
  std::vector<snapshot_file_info> files;
  for (size_t k = 0; k < tables.size(); ++k) {
    if (kind == snapshot_kind::incremental && tables[k]->snapshot_sequence() != parent)
      return make_model_error("snapshot " + std::to_string(sequence)
                              + ": shards disagree on the parent");
    auto info = snapshot_write_shard(*tables[k], root, sequence, static_cast<uint32_t>(k), kind, e);
    if (!info)
      return make_model_error(info.error());
    files.push_back(std::move(info.value()));
  }
  return snapshot_write_manifest(root, sequence, parent, tables[0]->options(), files, e);
}

std::vector<uint64_t> snapshot_list(const std::string& root, env& e) {
  std::vector<uint64_t> out;
  auto names = e.list_dir(root);
  if (!names)
    return out;
  for (const auto& name : names.value()) {
    unsigned long long seq = 0;
    if (std::sscanf(name.c_str(), "snap-%llu", &seq) == 1
        && e.exists((fs::path(root) / name / "MANIFEST").string()))
      out.push_back(seq);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace satrap
