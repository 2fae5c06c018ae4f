#include "actors/embedding_shard/embedding_shard.hpp"

#include "models/embedding/embedding_snapshot.hpp"
#include "models/tier/tiered_table.hpp"
#include "runtime/actor_meter.hpp"
#include "runtime/error.hpp"
#include "runtime/payload_checks.hpp"
#include "models/assert.hpp"
#include "runtime/partition_map.hpp"
#include "satrap_schemas/step.capnp.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>

namespace satrap {

namespace {

std::string ledger_path(const std::string& root, uint64_t sequence, int32_t shard) {
  return root + "/audit-ledger-" + std::to_string(sequence) + "-" + std::to_string(shard) + ".txt";
}

struct shard_state {
  embedding_shard_config config;
  std::unique_ptr<embedding_table> table;  // the rows (no tier)
  std::unique_ptr<tiered_table> tier;      // or the rows with the SSD tier
  // With the tier: an empty table whose (empty) snapshot files stand for the shard in a
  // snapshot's manifest, keeping its full / incremental chain; the rows are the tier's
  // checkpoint folder beside the file (tier_checkpoint_dir).
  std::unique_ptr<embedding_table> tier_marker;
  shard_stats stats;
  meter_handle meter;                  // for the status endpoint
  int64_t max_lookup_step = -1;        // furthest training step looked up here
  std::map<int64_t, int32_t> applied;  // audit ledger: batch -> applications
  static inline const char* name = "embedding_shard";
};

// A request that did not decode: logged, and answered with the decoder's error.
caf::error shard_refuse(const shard_state& st, const char* what, const caf::error& e) {
  spdlog::error("shard_bad_request shard={} request={} error=\"{}\"", st.config.shard, what,
                error_text(e));
  return make_error(errc::invalid_payload,
                    "shard " + std::to_string(st.config.shard) + ": " + error_text(e));
}

// A tier's disk failed (a full disk, a failed read): the request did nothing and may be repeated.
// A full or read-only disk is no_resource (the shard then stops: quit_if_deterministic).
caf::error tier_failed(const shard_state& st, const char* what, const std::string& why) {
  spdlog::error("shard_tier_failed shard={} request={} error=\"{}\"", st.config.shard, what, why);
  return make_error(io_errc_of(why),
                    "shard " + std::to_string(st.config.shard) + ": SSD tier: " + why);
}

// The tier could not be opened. A missing folder (a configuration error) or a full or read-only
// disk would fail again after a restart: invalid_config / no_resource. Anything else (RocksDB's
// lock still held by a failed generation's shard in this process) is io_failure: restarted.
struct tier_open_error : std::runtime_error {
  explicit tier_open_error(const std::string& why)
      : std::runtime_error(why),
        code(why.find(std::strerror(ENOENT)) != std::string::npos ? errc::invalid_config
                                                                  : io_errc_of(why)) {}
  errc code;
};

// A request failed in a way a restart would meet again (the tier's disk full or read-only): the
// shard stops with that error, so that its supervisor fails the job at once with the cause
// instead of restarting it into the same wall (the rows of the last checkpoint stay as they were).
void quit_if_deterministic(embedding_shard_actor::pointer self, const caf::error& e) {
  if (failure_is_deterministic(e))
    self->quit(e);
}

// The rows are written by the store straight into the reply's Data blob, which lies inside the
// payload's own buffer (payload_builder): no scratch rows, no flattening copy.
caf::result<capnp_payload> shard_lookup(shard_state& st, const capnp_payload& request) {
  auto req = decode_lookup_request(request);
  if (!req)
    return shard_refuse(st, "lookup", req.error());
  auto ids = req->ids;
  auto dim = static_cast<size_t>(st.config.embedding.dim);
  auto row_bytes = ids.size() * dim * sizeof(float);
  payload_builder mb(payload_builder::words_for(2, 1, {row_bytes}), row_bytes);
  auto out = mb.initRoot<schema::EmbeddingRows>();
  out.setBatch(req->batch);
  out.setDim(static_cast<uint32_t>(dim));
  auto* rows = reinterpret_cast<float*>(out.initRows(row_bytes).begin());
  if (st.tier) {
    auto done = req->read_only ? st.tier->peek(ids, rows) : st.tier->lookup(ids, rows);
    if (!done)
      return tier_failed(st, "lookup", done.error());
    if (!req->read_only)
      st.max_lookup_step = std::max(st.max_lookup_step, req->batch / st.config.trainers);
    st.stats.lookups += static_cast<int64_t>(ids.size());
    return mb.finish();
  }
  if (req->read_only) {
    st.table->peek(ids, rows);
  } else {
    st.table->lookup(ids, rows);
    st.max_lookup_step = std::max(st.max_lookup_step, req->batch / st.config.trainers);
  }
  st.stats.lookups += static_cast<int64_t>(ids.size());
  SATRAP_ASSERT(
    st.table->options().capacity == 0 || st.table->size() <= st.table->options().capacity,
    "rows={} capacity={}", st.table->size(), st.table->options().capacity);
  return mb.finish();
}

caf::result<int64_t> shard_update(shard_state& st, const capnp_payload& request) {
  auto req = decode_embedding_gradients(request, static_cast<uint32_t>(st.config.embedding.dim));
  if (!req)
    return shard_refuse(st, "update", req.error());
  auto ids = req->ids;
  auto& sched = st.config.embedding.schedule;
  const bool scheduled = sched.kind != lr_schedule_kind::constant || sched.warmup_steps > 0;
  if (st.tier) {
    if (scheduled)
      st.tier->set_schedule_step(req->batch / std::max(st.config.trainers, 1));
    if (auto done = st.tier->update(ids, req->grads.data()); !done)
      return tier_failed(st, "update", done.error());
  } else {
    if (scheduled)
      st.table->set_schedule_step(req->batch / std::max(st.config.trainers, 1));
    st.table->update(ids, req->grads.data());
  }
  st.stats.updates += static_cast<int64_t>(ids.size());
  auto step = req->batch / st.config.trainers;
  if (st.max_lookup_step > step + st.config.staleness) {
    ++st.stats.staleness_violations;
    spdlog::error("staleness_violated shard={} batch={} step={} max_lookup_step={} staleness={}",
                  st.config.shard, req->batch, step, st.max_lookup_step, st.config.staleness);
  }
  if (st.config.audit)
    ++st.applied[req->batch];
  return static_cast<int64_t>(ids.size());
}

shard_stats shard_stats_now(const shard_state& st) {
  auto s = st.stats;
  auto c = st.tier ? st.tier->ram().counters() : st.table->counters();
  if (st.tier) {
    tier_counters t = st.tier->counters();
    s.tier_hits = static_cast<int64_t>(t.hits);
    s.tier_misses = static_cast<int64_t>(t.misses);
    s.tier_cold_hits = static_cast<int64_t>(t.cold_hits);
    s.tier_prefetch_hits = static_cast<int64_t>(t.prefetch_hits);
    s.tier_bytes_read = static_cast<int64_t>(t.bytes_read);
    s.tier_bytes_written = static_cast<int64_t>(t.bytes_written);
    s.tier_ram_bytes = static_cast<int64_t>(t.ram_bytes);
  }
  s.rows = static_cast<int64_t>(c.rows);
  s.bytes = static_cast<int64_t>(c.bytes);
  s.admissions = static_cast<int64_t>(c.admissions);
  s.evictions = static_cast<int64_t>(c.evictions);
  s.not_admitted_lookups = static_cast<int64_t>(c.not_admitted_lookups);
  s.not_admitted_gradients = static_cast<int64_t>(c.not_admitted_gradients);
  for (auto [batch, times] : st.applied) {
    s.applied.push_back(batch);
    s.applied.push_back(times);
  }
  return s;
}

// The live tier of this shard: PATH/shard-k.
std::string tier_live_dir(const embedding_shard_config& c) {
  return c.tier.path + "/shard-" + std::to_string(c.shard);
}

// The tier's rows in snapshot `sequence`: a folder beside the shard's (empty) file.
std::string tier_checkpoint_dir(const std::string& root, uint64_t sequence, int32_t shard) {
  return snapshot_dir(root, sequence) + "/tier-" + std::to_string(shard);
}

// The tier's marker table (shard_state::tier_marker): the job's row format, no rows.
std::unique_ptr<embedding_table> tier_marker(const embedding_shard_config& c, uint64_t sequence) {
  embedding_options o = c.embedding;
  o.capacity = 64;  // holds nothing: no slabs nor sketch worth the name
  o.admission = admission_kind::all;
  auto t = std::make_unique<embedding_table>(o);
  if (sequence > 0)
    t->mark_snapshot(sequence);  // the next incremental snapshot's parent
  return t;
}

// Opens the shard's tier on its folder as it is (fresh: emptied first, so that the rows of an
// earlier run or generation are never taken for this one's).
result<std::unique_ptr<tiered_table>> open_tier(const embedding_shard_config& c, bool fresh) {
  tier_options t = c.tier;
  t.path = tier_live_dir(c);
  if (fresh) {
    std::error_code ec;
    std::filesystem::remove_all(t.path, ec);
    if (ec)
      return make_model_error(t.path + ": emptying the tier's folder: " + ec.message());
  }
  return tiered_table::open(c.embedding, t);
}

caf::result<shard_snapshot_info> shard_snapshot(shard_state& st, const std::string& root,
                                                uint64_t sequence, bool full) {
  auto& files = *st.config.environment;
  if (st.tier) {  // a consistent copy of the tier (RocksDB: hard links), then the marker's file
    const std::string dir = tier_checkpoint_dir(root, sequence, st.config.shard);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);  // a repeated request's partial copy
    auto made = files.create_dirs(snapshot_dir(root, sequence));
    auto copied = made ? st.tier->checkpoint(dir) : made;
    if (!copied)
      return make_error(io_errc_of(copied.error()),
                        "shard " + std::to_string(st.config.shard)
                          + ": snapshot of the SSD tier: " + copied.error());
  }
  auto info = snapshot_write_shard(st.tier ? *st.tier_marker : *st.table, root, sequence,
                                   static_cast<uint32_t>(st.config.shard),
                                   full ? snapshot_kind::full : snapshot_kind::incremental, files);
  if (!info)  // disk full or a read-only folder: no_resource (the job fails, no restart)
    return make_error(io_errc_of(info.error()),
                      "shard " + std::to_string(st.config.shard) + ": snapshot: " + info.error());
  if (st.config.audit) {
    std::string text;
    for (auto [batch, times] : st.applied)
      text += std::to_string(batch) + ' ' + std::to_string(times) + '\n';
    if (auto r = files.write_file_atomic(ledger_path(root, sequence, st.config.shard), text, false);
        !r)
      return make_error(errc::io_failure, "shard " + std::to_string(st.config.shard)
                                            + ": cannot write its audit ledger: " + r.error());
  }
  spdlog::debug("shard_snapshot shard={} sequence={} full={} rows={}", st.config.shard, sequence,
                full, info->rows);
  return shard_snapshot_info{st.config.shard, info->name, static_cast<int64_t>(info->rows),
                             static_cast<int64_t>(info->bytes), info->checksum};
}

// With the tier: the live folder becomes a copy of the snapshot's tier folder (RocksDB's files
// hard-linked), so the rows are those of the checkpoint, never later write-backs. The tier's
// folders are per shard: the shard count must be the one that wrote them (no resharding).
caf::error shard_restore_tier(shard_state& st, const std::string& root, uint64_t sequence) {
  const std::string shard = "shard " + std::to_string(st.config.shard);
  auto& files = *st.config.environment;
  auto names = files.list_dir(snapshot_dir(root, sequence));
  if (!names)
    return make_error(errc::io_failure, shard + ": restore: " + names.error());
  int32_t written = 0;
  for (const auto& n : *names)
    written += n.starts_with("tier-");
  if (written != st.config.shards)
    return make_error(errc::invalid_config,
                      shard + ": restore: snapshot " + std::to_string(sequence) + " holds "
                        + std::to_string(written) + " SSD tier folders, the job has "
                        + std::to_string(st.config.shards)
                        + " shards (a job with the SSD tier resumes with the shard count that "
                          "wrote its checkpoint)");
  st.tier.reset();  // closes the live store before its folder is replaced
  // A failed restore leaves the shard an empty tier (never none: every request needs one).
  auto failed = [&st, &shard](errc code, const std::string& why) {
    auto fresh = open_tier(st.config, true);
    if (!fresh)
      throw tier_open_error("SSD tier: " + fresh.error());
    st.tier = std::move(*fresh);
    return make_error(code, shard + ": restore of the SSD tier: " + why);
  };
  auto copied =
    restore_tier(tier_checkpoint_dir(root, sequence, st.config.shard), tier_live_dir(st.config));
  if (!copied)
    return failed(errc::io_failure, copied.error());
  auto tier = open_tier(st.config, false);
  if (!tier)
    return failed(io_errc_of(tier.error()), tier.error());
  st.tier = std::move(*tier);  // RAM starts empty: every row comes back from the disk
  st.tier_marker = tier_marker(st.config, sequence);
  return {};
}

caf::result<int64_t> shard_restore(shard_state& st, const std::string& root, uint64_t sequence) {
  snapshot_restore_stats stats_rows;
  auto& files = *st.config.environment;
  if (st.tier) {
    if (auto err = shard_restore_tier(st, root, sequence))
      return err;
  } else {
    auto map = partition_map::uniform(static_cast<uint32_t>(st.config.partitions),
                                      static_cast<uint32_t>(st.config.shards));
    auto me = static_cast<uint32_t>(st.config.shard);
    st.table = std::make_unique<embedding_table>(st.config.embedding);  // restore needs it empty
    auto stats = snapshot_restore(
      *st.table, root, sequence, [&map, me](uint64_t id) { return map.shard_of(id) == me; }, files);
    if (!stats)
      return make_error(errc::io_failure,
                        "shard " + std::to_string(st.config.shard) + ": restore: " + stats.error());
    stats_rows = *stats;
  }
  st.applied.clear();
  st.max_lookup_step = -1;
  if (st.config.audit) {
    auto text = files.read_file(ledger_path(root, sequence, st.config.shard));
    if (!text)
      return make_error(errc::io_failure, "shard " + std::to_string(st.config.shard)
                                            + ": restore: no audit ledger for snapshot "
                                            + std::to_string(sequence));
    std::istringstream in(text.value());
    int64_t batch = 0;
    int32_t times = 0;
    while (in >> batch >> times)
      st.applied[batch] = times;
  }
  spdlog::info("shard_restored shard={} sequence={} rows={} tier={}", st.config.shard, sequence,
               stats_rows.rows_kept, st.tier != nullptr);
  return static_cast<int64_t>(stats_rows.rows_kept);
}

embedding_shard_actor::behavior_type shard_behavior(
  embedding_shard_actor::stateful_pointer<shard_state> self, embedding_shard_config config) {
  // An exception fails the actor with its message (and bad_alloc as no_resource), not CAF's
  // bare "runtime_error": the supervisor's record and its restart decision see the cause.
  self->set_exception_handler([](caf::scheduled_actor*, std::exception_ptr& e) -> caf::error {
    try {
      std::rethrow_exception(e);
    } catch (const tier_open_error& x) {  // a restart would fail again: the job fails at once
      return make_error(x.code, std::string("embedding shard: ") + x.what());
    } catch (...) {
      return exception_error(e, "embedding shard");
    }
  });
  auto& st = self->state;
  st.config = std::move(config);
  if (st.config.tier.kind == tier_kind::ssd) {
    auto tier = open_tier(st.config, true);
    if (!tier)  // the actor fails with the cause (a missing folder, RocksDB not compiled in)
      throw tier_open_error("SSD tier: " + tier.error());
    st.tier = std::move(*tier);
    st.tier_marker = tier_marker(st.config, 0);
    st.table = nullptr;
  } else {
    st.table = std::make_unique<embedding_table>(st.config.embedding);
  }
  st.stats.shard = st.config.shard;
  spdlog::debug("shard_started shard={} dim={} kernels={} tier={}", st.config.shard,
                st.config.embedding.dim, (st.tier ? st.tier->ram() : *st.table).kernels_name(),
                st.tier != nullptr);
  st.meter = meter_handle("embedding_shard", st.config.shard, st.config.job);
  return {
    [self](lookup_atom, const capnp_payload& req) {
      self->state.meter.on_message(self);
      auto r = shard_lookup(self->state, req);
      if (r.flag == caf::rt_error)
        quit_if_deterministic(self, r.err);
      return r;
    },
    [self](update_atom, const capnp_payload& req) {
      self->state.meter.on_message(self);
      auto r = shard_update(self->state, req);
      if (r.flag == caf::rt_error)
        quit_if_deterministic(self, r.err);
      return r;
    },
    [self](stats_atom) { return shard_stats_now(self->state); },
    [self](snapshot_atom, const std::string& root, uint64_t sequence, bool full) {
      return shard_snapshot(self->state, root, sequence, full);
    },
    [self](restore_atom, const std::string& root, uint64_t sequence) {
      return shard_restore(self->state, root, sequence);
    },
  };
}

}  // namespace

embedding_shard_actor spawn_embedding_shard(caf::actor_system& sys,
                                            const embedding_shard_config& config) {
  return sys.spawn(shard_behavior, config);
}

}  // namespace satrap
