#include "models/embedding/snapshot_manifest.hpp"

#include "satrap_schemas/snapshot.capnp.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <set>

namespace satrap {

namespace {

constexpr uint32_t dim_max = 1u << 16;
constexpr size_t name_max = 255;

std::string name_problem(const std::string& name) {
  if (name.empty())
    return "an empty file name";
  if (name.size() > name_max)
    return "a file name of " + std::to_string(name.size()) + " bytes";
  if (name == "." || name == "..")
    return "the file name '" + name + "'";
  for (char c : name)
    if (c == '/' || c == '\\' || c == '\0')
      return "the file name '" + name + "' (not a plain name inside the snapshot directory)";
  return "";
}

result<snapshot_manifest> decode(std::span<const std::byte> bytes) {
  kj::ArrayPtr<const capnp::word> words(reinterpret_cast<const capnp::word*>(bytes.data()),
                                        bytes.size() / sizeof(capnp::word));
  capnp::ReaderOptions options;
  options.traversalLimitInWords = words.size() + 64;
  capnp::FlatArrayMessageReader reader(words, options);
  if (reader.getEnd() != words.end())
    return make_model_error("bytes after the manifest message");
  auto in = reader.getRoot<schema::SnapshotManifest>();
  snapshot_manifest m;
  m.sequence = in.getSequence();
  m.parent = in.getParent();
  if (m.sequence == 0)
    return make_model_error("sequence 0 (snapshots are numbered from 1)");
  if (m.parent >= m.sequence)
    return make_model_error("parent " + std::to_string(m.parent) + " is not older than snapshot "
                            + std::to_string(m.sequence));
  auto f = in.getFormat();
  m.dim = f.getDim();
  m.optimizer = f.getOptimizer().cStr();
  m.precision = f.getPrecision().cStr();
  m.row_bytes = f.getRowBytes();
  if (m.dim == 0 || m.dim > dim_max)
    return make_model_error("dim " + std::to_string(m.dim) + " is not in [1, "
                            + std::to_string(dim_max) + "]");
  if (m.row_bytes < 2 * m.dim)
    return make_model_error(std::to_string(m.row_bytes) + " bytes per row cannot hold "
                            + std::to_string(m.dim) + " weights");
  std::set<std::string> names;
  for (auto e : in.getFiles()) {
    snapshot_file_info info;
    info.name = std::string(e.getName().cStr(), e.getName().size());
    info.shard = e.getShard();
    info.rows = e.getRows();
    info.bytes = e.getBytes();
    info.checksum = e.getChecksum();
    if (auto why = name_problem(info.name); !why.empty())
      return make_model_error("file " + std::to_string(m.files.size()) + " has " + why);
    if (!names.insert(info.name).second)
      return make_model_error("file '" + info.name + "' is listed twice");
    m.files.push_back(std::move(info));
  }
  return m;
}

}  // namespace

result<snapshot_manifest> snapshot_manifest_decode(std::span<const std::byte> bytes) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0)
    return make_model_error(std::to_string(bytes.size())
                            + " bytes, not a whole number of 8-byte words");
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(capnp::word) != 0)
    return make_model_error("not word-aligned");
  try {
    return decode(bytes);
  } catch (const kj::Exception& e) {
    return make_model_error(std::string("malformed: ") + e.getDescription().cStr());
  }
}

}  // namespace satrap
