// The snapshot manifest's checked decoder (models/embedding/snapshot_manifest.hpp), alone and
// through a restore: a manifest naming a file outside its directory is refused before any file
// is opened.
#include "models/embedding/embedding_snapshot.hpp"
#include "models/embedding/snapshot_manifest.hpp"
#include "satrap_schemas/snapshot.capnp.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

using namespace satrap;
namespace fs = std::filesystem;

namespace {

std::vector<capnp::word> manifest_words(uint64_t seq, uint64_t parent, uint32_t dim,
                                        std::vector<std::string> names) {
  capnp::MallocMessageBuilder mb;
  auto m = mb.initRoot<schema::SnapshotManifest>();
  m.setSequence(seq);
  m.setParent(parent);
  auto f = m.initFormat();
  f.setDim(dim);
  f.setOptimizer("sgd");
  f.setPrecision("fp32");
  f.setRowBytes(dim * 4);
  auto files = m.initFiles(static_cast<unsigned>(names.size()));
  for (unsigned i = 0; i < names.size(); ++i) {
    files[i].setName(names[i]);
    files[i].setShard(i);
    files[i].setRows(10);
  }
  auto flat = capnp::messageToFlatArray(mb);
  return {flat.begin(), flat.end()};
}

result<snapshot_manifest> decode(const std::vector<capnp::word>& w) {
  return snapshot_manifest_decode(
    {reinterpret_cast<const std::byte*>(w.data()), w.size() * sizeof(capnp::word)});
}

std::string refusal(const result<snapshot_manifest>& r) { return r ? "" : r.error(); }

bool says(const std::string& text, const std::string& what) {
  INFO(text);
  return text.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("snapshot manifest: a valid one decodes with its files") {
  auto m = decode(manifest_words(4, 2, 8, {"shard-0.snap", "shard-1.snap"}));
  REQUIRE(m);
  CHECK(m->sequence == 4);
  CHECK(m->parent == 2);
  CHECK(m->dim == 8);
  CHECK(m->row_bytes == 32);
  REQUIRE(m->files.size() == 2);
  CHECK(m->files[1].name == "shard-1.snap");
  CHECK(m->files[1].shard == 1);
}

TEST_CASE("snapshot manifest: bad numbers, names and framing are refused") {
  CHECK(says(refusal(decode(manifest_words(0, 0, 8, {"a"}))), "sequence 0"));
  CHECK(says(refusal(decode(manifest_words(3, 3, 8, {"a"}))), "parent 3 is not older"));
  CHECK(says(refusal(decode(manifest_words(3, 0, 0, {"a"}))), "dim 0"));
  CHECK(says(refusal(decode(manifest_words(3, 0, 8, {"../../etc/passwd"}))), "not a plain name"));
  CHECK(says(refusal(decode(manifest_words(3, 0, 8, {".."}))), "the file name '..'"));
  CHECK(says(refusal(decode(manifest_words(3, 0, 8, {""}))), "an empty file name"));
  CHECK(says(refusal(decode(manifest_words(3, 0, 8, {"a", "a"}))), "listed twice"));
  auto w = manifest_words(3, 0, 8, {"a"});
  w.push_back(capnp::word{});  // a stray word after the message
  CHECK(says(refusal(decode(w)), "bytes after the manifest"));
  w.resize(w.size() - 3);  // cut short
  CHECK(says(refusal(decode(w)), "malformed"));
  std::vector<std::byte> odd(12);
  CHECK(says(refusal(snapshot_manifest_decode(odd)), "not a whole number of 8-byte words"));
}

TEST_CASE("snapshot manifest: a restore refuses a manifest pointing outside its directory") {
  auto root = fs::temp_directory_path() / ("satrap_manifest_" + std::to_string(::getpid()));
  fs::remove_all(root);
  embedding_options o;
  o.dim = 4;
  o.optimizer = sparse_optimizer_kind::sgd;
  fs::create_directories(snapshot_dir(root.string(), 1));
  std::vector<snapshot_file_info> files{{"../../outside.snap", 0, 0, 0, 0}};
  REQUIRE(snapshot_write_manifest(root.string(), 1, 0, o, files));
  embedding_table table(o);
  auto r = snapshot_restore(table, root.string(), 1);
  REQUIRE(!r);
  CHECK(says(r.error(), "MANIFEST: file 0 has the file name '../../outside.snap'"));
  fs::remove_all(root);
}
