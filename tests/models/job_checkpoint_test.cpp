// The job checkpoint folder's format (models/checkpoint/job_checkpoint.hpp) on an in-memory env:
// written, found, read back and pruned without a real disk; a full disk, a failed fsync and a
// malformed manifest answer the errors the supervisor classifies (ENOSPC's and EIO's texts; a
// malformed manifest is bad_input). The end-to-end checkpoint tests are tests/actors/checkpoint_test.
#include "models/checkpoint/job_checkpoint.hpp"
#include "models/embedding/embedding_snapshot.hpp"
#include "models/memory_env.hpp"

#include <doctest/doctest.h>

#include <cerrno>
#include <cstring>

namespace satrap {

namespace {

std::vector<char> dense_state(size_t words, char fill) {
  return std::vector<char>(words * 8, fill);
}

checkpoint_meta meta_at(uint64_t seq) {
  checkpoint_meta m;
  m.sequence = seq;
  m.step = static_cast<int64_t>(seq) * 10;
  m.embedding_sequence = seq;
  m.full = true;
  m.trainers = 1;
  m.shards = 1;
  m.job = "t";
  m.samples = m.step * 8;
  m.step_losses = std::vector<double>(static_cast<size_t>(m.step), 0.5);
  return m;
}

// A complete checkpoint `seq`: a full embedding snapshot, the dense state, the manifest last.
void write_checkpoint(env& e, const std::string& dir, uint64_t seq) {
  embedding_options o;
  o.dim = 4;
  embedding_table t(o);
  std::vector<uint64_t> ids{1, 2, 3};
  std::vector<float> rows(ids.size() * 4);
  t.lookup(ids, rows.data());
  std::vector<embedding_table*> tables{&t};
  // A fresh table per checkpoint: mark it at the previous sequence, so `seq` exceeds it.
  if (seq > 1)
    t.mark_snapshot(seq - 1);
  REQUIRE(snapshot_write(tables, checkpoint_embedding_root(dir), seq, snapshot_kind::full, e).ok());
  auto m = meta_at(seq);
  auto state = dense_state(4, static_cast<char>(seq));
  REQUIRE(checkpoint_write_dense(dir, m, state, e).ok());
  REQUIRE(checkpoint_write_meta(dir, m, e).ok());
}

}  // namespace

TEST_CASE("job checkpoint: written, found, read back and pruned on a memory env") {
  memory_env e;
  const std::string dir = "/ckpt";
  auto none = checkpoint_latest(dir, e);
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  for (uint64_t seq = 1; seq <= 4; ++seq)
    write_checkpoint(e, dir, seq);
  auto latest = checkpoint_latest(dir, e);
  REQUIRE(latest.ok());
  REQUIRE(latest->has_value());
  CHECK((*latest)->sequence == 4);
  CHECK((*latest)->step == 40);
  auto dense = checkpoint_read_dense(dir, **latest, e);
  REQUIRE(dense.ok());
  CHECK(*dense == dense_state(4, 4));
  auto pruned = checkpoint_prune(dir, 2, e);
  REQUIRE(pruned.ok());
  CHECK(pruned->checkpoints_removed == 2);
  CHECK(pruned->snapshots_removed == 2);
  CHECK(pruned->bytes_freed > 0);
  CHECK_FALSE(e.exists(dir + "/checkpoint-00000001.json"));
  CHECK(e.exists(dir + "/checkpoint-00000003.json"));
  CHECK(snapshot_list(checkpoint_embedding_root(dir), e) == std::vector<uint64_t>{3, 4});
  CHECK(e.syncs() > 0);  // the dense files and snapshot files are synced, in memory
}

TEST_CASE("job checkpoint: a full disk and a failed fsync answer the real disk's error texts") {
  memory_env e;
  const std::string dir = "/ckpt";
  write_checkpoint(e, dir, 1);
  auto m = meta_at(2);
  auto state = dense_state(4, 2);
  e.set_capacity(e.used_bytes());
  auto full = checkpoint_write_dense(dir, m, state, e);
  REQUIRE_FALSE(full.ok());
  CHECK_FALSE(full.bad_input());
  CHECK(full.error().find(std::strerror(ENOSPC)) != std::string::npos);
  CHECK_FALSE(e.exists(dir + "/dense-00000002.bin.tmp"));  // the temporary goes
  CHECK(e.refused_writes() > 0);
  e.set_capacity(UINT64_MAX);
  e.fail_syncs(1);
  auto eio = checkpoint_write_dense(dir, m, state, e);
  REQUIRE_FALSE(eio.ok());
  CHECK(eio.error().find(std::strerror(EIO)) != std::string::npos);
  CHECK(e.failed_syncs() == 1);
  CHECK(checkpoint_write_dense(dir, m, state, e).ok());  // the fault has passed
  // The newest complete checkpoint is still the first.
  auto latest = checkpoint_latest(dir, e);
  REQUIRE(latest.ok());
  CHECK((*latest)->sequence == 1);
}

TEST_CASE("job checkpoint: a malformed manifest is the input's fault") {
  memory_env e;
  REQUIRE(e.create_dirs("/ckpt").ok());
  REQUIRE(e.write_file_atomic("/ckpt/checkpoint-00000001.json", "{\"sequence\": 1}").ok());
  auto bad = checkpoint_latest("/ckpt", e);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.bad_input());
  CHECK(bad.error().find("not a valid checkpoint manifest") != std::string::npos);
}

}  // namespace satrap
